"""One call's SIP dialog, as the server keeps it from the INVITE to the BYE."""

from __future__ import annotations

from dataclasses import dataclass, field

from app.telephony.sip import message as sip
from app.telephony.sip.leg import SipLeg
from app.telephony.sip.message import SipMessage


@dataclass(slots=True)
class Dialog:
    invite: SipMessage
    source: tuple[str, int]
    local_tag: str = field(default_factory=sip.new_tag)
    leg: SipLeg | None = None
    final: bytes | None = None  # our final response to the INVITE, resent on retransmission
    cancelled: bool = False
    confirmed: bool = False  # the ACK came
    ended: bool = False  # BYE sent or received
    cseq: int = 1
