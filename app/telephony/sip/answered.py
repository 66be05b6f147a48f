"""Final responses, kept for the retransmissions of their requests: over UDP a caller that
missed our answer sends its request again, and must get the same answer, not a new one."""

from __future__ import annotations

import asyncio
from collections import OrderedDict

from app.telephony.sip.message import SipMessage

MAX_REMEMBERED = 1024
KEEP_S = 32.0  # 64*T1 (RFC 3261's timers): how long a client transaction may retransmit


def transaction(request: SipMessage) -> tuple[str, str, str]:
    """A server transaction's name: CANCEL shares its INVITE's branch, not its method."""
    return request.call_id, request.branch, request.method


class Answered:
    def __init__(self) -> None:
        self._responses: OrderedDict[tuple[str, str, str], bytes] = OrderedDict()

    def get(self, request: SipMessage) -> bytes | None:
        return self._responses.get(transaction(request))

    def remember(self, request: SipMessage, data: bytes) -> None:
        """`data` answers `request` and its retransmissions, for KEEP_S."""
        key = transaction(request)
        self._responses[key] = data
        while len(self._responses) > MAX_REMEMBERED:
            self._responses.popitem(last=False)
        asyncio.get_running_loop().call_later(KEEP_S, self._responses.pop, key, None)

    def acked(self, ack: SipMessage) -> None:
        """The ACK to a refused INVITE: its refusal need not be kept."""
        self._responses.pop((ack.call_id, ack.branch, "INVITE"), None)
