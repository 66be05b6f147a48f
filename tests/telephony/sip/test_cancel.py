"""A caller who gives up while the call is still being decided on: CANCEL gets 200, the
INVITE 487 at once, and the deciding is cancelled, so an application's decision that
comes after it is too late (409 over HTTP) and nothing is answered. Deciding takes
microseconds on a real server without a webhook, so a double that waits stands in."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from app.calls.admission import Caller
from app.config import SipSettings
from app.telephony.sip.leg import Invite, SipLeg
from app.telephony.sip.sdp import AudioOffer
from app.telephony.sip.server import SipServer
from tests.support.sip_client import SipPeer


class SlowCalls:
    def __init__(self) -> None:
        self.go_on = asyncio.Event()
        self.deciding: list[str] = []  # what became of each call asked about
        self.hung_up: list[str] = []

    async def answer_sip(
        self, offer: AudioOffer, caller: Caller, invite: Invite, holding: int = 0
    ) -> SipLeg:
        self.deciding.append("ringing")
        try:
            await self.go_on.wait()
        except asyncio.CancelledError:
            self.deciding[-1] = "cancelled"
            raise
        self.deciding[-1] = "answered"
        return SipLeg("sess_slow", offer)

    async def hang_up(self, session_id: str, *, caller_left: bool = False) -> bool:
        self.hung_up.append(session_id)
        return True


@pytest.fixture
async def endpoint() -> AsyncIterator[tuple[SipServer, SlowCalls]]:
    calls = SlowCalls()
    server = SipServer(SipSettings(port=0), calls, "127.0.0.1")
    await server.start()
    yield server, calls
    await server.aclose(timeout_s=0)


async def test_cancel_before_the_answer_ends_the_invite_with_487(
    endpoint: tuple[SipServer, SlowCalls],
) -> None:
    server, calls = endpoint
    phone = await SipPeer.open()
    try:
        call_id, branch = phone.invite(server.port)
        assert (await phone.next()).status == 100
        phone.request("CANCEL", server.port, call_id=call_id, branch=branch)
        cancelled = await phone.next()
        assert (cancelled.status, cancelled.cseq[1]) == (200, "CANCEL")
        ended = await phone.next()
        assert (ended.status, ended.cseq[1]) == (487, "INVITE")
        assert calls.deciding == ["cancelled"], "the decision it waited for is too late"
        calls.go_on.set()
        with pytest.raises(TimeoutError):
            await phone.next(timeout_s=0.5)  # never answered after all
        assert calls.hung_up == [], "no call was made"
    finally:
        phone.close()
