"""Calls answered (200 OK sent) whose ACK has not come. The source of an INVITE is not
verified until it ACKs, since only the real caller hears our 200 and its To tag: so such
a call holds no slot and no session, only its record and its RTP socket, and both are
bounded here, overall and for each client address.

The oldest is forgotten to make room, and each after ACK_WAIT_S: silently, with no BYE
for a dialog never confirmed (a forged source drew 11 or more). A real caller ACKs
within a round trip, so a flood of forged INVITEs must outpace MAX_UNACKED in that time
to cost one a call; it never takes a slot.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Callable

from app.telephony.sip.dialog import Dialog
from app.telephony.sip.requests import TIMEOUT_S

MAX_UNACKED = 256  # each holds a socket (a file descriptor) for its RTP
MAX_UNACKED_PER_CLIENT = 64  # a trunk's calls in set-up at once; an open address has less
ACK_WAIT_S = TIMEOUT_S  # RFC 3261's timer H: how long a 200 OK waits for its ACK


class Unacked:
    def __init__(self, forget: Callable[[Dialog], None]) -> None:
        """`forget` a dialog that got no ACK: drop its record and its leg."""
        self._forget = forget
        # By Call-ID, oldest first, with the timer that forgets each.
        self._waiting: OrderedDict[str, tuple[Dialog, asyncio.TimerHandle]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._waiting)

    def add(self, dialog: Dialog) -> None:
        """`dialog` was answered: it waits for its ACK, making room if need be."""
        mine = [d for d, _ in self._waiting.values() if d.client == dialog.client]
        excess = len(mine) + 1 - MAX_UNACKED_PER_CLIENT
        for oldest in mine[: max(0, excess)]:
            self._drop(oldest)
        while len(self._waiting) >= MAX_UNACKED:
            self._drop(next(iter(self._waiting.values()))[0])
        timer = asyncio.get_running_loop().call_later(ACK_WAIT_S, self._drop, dialog)
        self._waiting[dialog.invite.call_id] = (dialog, timer)

    def acked(self, dialog: Dialog) -> None:
        waiting = self._waiting.get(dialog.invite.call_id)
        if waiting is not None and waiting[0] is dialog:
            del self._waiting[dialog.invite.call_id]
            waiting[1].cancel()

    def close(self) -> None:
        while self._waiting:
            self._drop(next(iter(self._waiting.values()))[0])

    def _drop(self, dialog: Dialog) -> None:
        waiting = self._waiting.get(dialog.invite.call_id)
        if waiting is None or waiting[0] is not dialog:
            return
        self.acked(dialog)
        self._forget(dialog)
