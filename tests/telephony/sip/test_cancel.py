"""A caller who gives up while the agent is still setting the call up: CANCEL gets 200,
the INVITE 487, and the call that was being made is hung up at once. Setting up takes
microseconds on a real server, so a double that waits stands in for it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from app.calls.admission import ANYONE, Caller
from app.config import SipSettings
from app.telephony.sip.leg import SipLeg
from app.telephony.sip.sdp import AudioOffer
from app.telephony.sip.server import SipServer
from tests.support.sip_client import SipPeer


class SlowCalls:
    def __init__(self) -> None:
        self.go_on = asyncio.Event()
        self.hung_up: list[str] = []
        self.legs: list[SipLeg] = []

    async def open_sip(
        self, offer: AudioOffer, host: str, caller: Caller = ANYONE, invite: object = None
    ) -> SipLeg:
        await self.go_on.wait()
        leg = SipLeg("sess_slow", offer)
        await leg.open(host, lambda pcm: None, lambda key: None)
        self.legs.append(leg)
        return leg

    async def hang_up(self, session_id: str, *, caller_left: bool = False) -> bool:
        self.hung_up.append(session_id)
        for leg in self.legs:
            await leg.close()
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
        calls.go_on.set()  # the call was set up meanwhile: it must not be answered
        ended = await phone.final(call_id=call_id)
        assert (ended.status, ended.cseq[1]) == (487, "INVITE")
        assert calls.hung_up == ["sess_slow"]
    finally:
        phone.close()
