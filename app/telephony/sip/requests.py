"""Our own requests within a call (BYE, REFER) as RFC 3261's non-INVITE client
transaction over UDP: sent again at T1 doubling to T2 until a final response comes (timer
E), given up at timer F. `resends` is the schedule; a 200 to an INVITE keeps it too."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Iterator

from app.telephony.sip import message as sip
from app.telephony.sip.dialog import Dialog
from app.telephony.sip.message import SipMessage

T1_S, T2_S = 0.5, 4.0  # RFC 3261's retransmission timers
TIMEOUT_S = 64 * T1_S  # timer B/F/H: a transaction gives up

Address = tuple[str, int]


def resends() -> Iterator[float]:
    """How long to wait after each sending: T1 doubling to T2, for 64 T1 in all."""
    interval, deadline = T1_S, time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline:
        yield interval
        interval = min(interval * 2, T2_S)


class Requests:
    def __init__(
        self, send: Callable[[bytes, Address], None], here: Callable[[Address], str]
    ) -> None:
        """`send` a datagram; `here`: our host:port as the peer at an address reaches it."""
        self._send = send
        self._here = here
        # Our requests' branches, until answered: their final responses.
        self._pending: dict[str, asyncio.Future[SipMessage]] = {}

    @property
    def pending(self) -> bool:
        return bool(self._pending)

    def answered(self, response: SipMessage) -> None:
        """A response came: the final one ends the request it answers."""
        done = self._pending.get(response.branch)
        if done is not None and response.status >= 200 and not done.done():
            done.set_result(response)

    async def send(
        self,
        dialog: Dialog,
        method: str,
        extra: list[tuple[str, str]] = (),  # type: ignore[assignment]
    ) -> SipMessage | None:
        """`method` within the call, until its final response; that response, or None."""
        invite, branch = dialog.invite, sip.new_branch()
        dialog.cseq += 1
        target = sip.uri_of(invite.get("Contact") or "") or invite.uri
        headers = [
            ("Via", f"SIP/2.0/UDP {self._here(dialog.source)};branch={branch};rport"),
            ("Max-Forwards", "70"),
            ("From", f"{invite.get('To')};tag={dialog.local_tag}"),
            ("To", invite.get("From") or ""),
            ("Call-ID", invite.call_id),
            ("CSeq", f"{dialog.cseq} {method}"),
            *(("Route", route) for route in invite.all("Record-Route")),
            *extra,
        ]
        data = sip.request(method, target, headers)
        done = self._pending[branch] = asyncio.get_running_loop().create_future()
        try:
            for interval in resends():
                if done.done():
                    break
                self._send(data, dialog.source)
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(interval):
                        await asyncio.shield(done)
        finally:
            self._pending.pop(branch, None)
        return done.result() if done.done() else None
