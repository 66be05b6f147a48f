"""One call's SIP dialog, as the server keeps it from the INVITE to the BYE, and the
table of them all."""

from __future__ import annotations

import asyncio
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from app.calls.admission import client_key
from app.telephony.sip import message as sip
from app.telephony.sip.leg import SipLeg
from app.telephony.sip.message import SipMessage

MAX_DIALOGS = 1024  # beyond the pool, a flood of INVITEs is refused, not remembered


@dataclass(slots=True)
class Dialog:
    invite: SipMessage
    source: tuple[str, int]
    local_tag: str = field(default_factory=sip.new_tag)
    leg: SipLeg | None = None
    final: bytes | None = None  # our final response to the INVITE, resent on retransmission
    answering: asyncio.Task[Any] | None = None  # deciding on the INVITE, until its answer
    cancelled: bool = False
    confirmed: bool = False  # the ACK came
    ended: bool = False  # BYE sent or received
    cseq: int = 1
    client: str = field(init=False)  # who it counts against: the source's address (or /64)

    def __post_init__(self) -> None:
        self.client = client_key(self.source[0])


class Dialogs:
    """The calls the server knows, by Call-ID, and how many each client has: ringing,
    answered and up alike, for its share of the slots before one rings."""

    def __init__(self) -> None:
        self._by_call_id: dict[str, Dialog] = {}
        self._per_client: Counter[str] = Counter()

    def __len__(self) -> int:
        return len(self._by_call_id)

    @property
    def full(self) -> bool:
        return len(self._by_call_id) >= MAX_DIALOGS

    def get(self, call_id: str) -> Dialog | None:
        return self._by_call_id.get(call_id)

    def add(self, dialog: Dialog) -> None:
        self._by_call_id[dialog.invite.call_id] = dialog
        self._per_client[dialog.client] += 1

    def pop(self, dialog: Dialog) -> None:
        """Forget `dialog`, if it is still the one its Call-ID names."""
        if self._by_call_id.get(dialog.invite.call_id) is not dialog:
            return
        del self._by_call_id[dialog.invite.call_id]
        self._per_client[dialog.client] -= 1
        if self._per_client[dialog.client] <= 0:
            del self._per_client[dialog.client]

    def held_by(self, client: str) -> int:
        return self._per_client.get(client, 0)
