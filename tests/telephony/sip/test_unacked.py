"""Calls answered and not yet ACKed (app/telephony/sip/unacked.py): they hold no slot, are
bounded overall and for each address, and are forgotten without a BYE; a call refused
at its ACK (the pool filled meanwhile) is hung up with a BYE that says why. A double
stands in for the calls: its `claimed` are the slots taken."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from app.calls.admission import Caller
from app.config import SipSettings
from app.errors import SessionLimitReached
from app.telephony.sip import unacked
from app.telephony.sip.leg import Invite, SipLeg
from app.telephony.sip.message import SipMessage
from app.telephony.sip.sdp import AudioOffer
from app.telephony.sip.server import SipServer
from tests.support.sip_client import SipPeer


class Calls:
    def __init__(self) -> None:
        self.legs: list[SipLeg] = []
        self.claimed: list[str] = []
        self.full = False

    async def answer_sip(
        self, offer: AudioOffer, caller: Caller, invite: Invite, holding: int = 0
    ) -> SipLeg:
        leg = SipLeg(f"sess_{len(self.legs)}", offer)
        leg.claim = lambda: self._claim(leg)
        self.legs.append(leg)
        return leg

    def _claim(self, leg: SipLeg) -> None:
        if self.full:
            raise SessionLimitReached(1, 2)
        self.claimed.append(leg.session_id)

    async def hang_up(self, session_id: str, *, caller_left: bool = False) -> bool:
        return False


@pytest.fixture
async def endpoint() -> AsyncIterator[tuple[SipServer, Calls, SipPeer]]:
    calls = Calls()
    server = SipServer(SipSettings(port=0), calls, "127.0.0.1")
    await server.start()
    phone = await SipPeer.open()
    yield server, calls, phone
    phone.close()
    await server.aclose(timeout_s=0)
    for leg in calls.legs:
        leg.discard()


async def answered(phone: SipPeer, port: int) -> SipMessage:
    call_id, _ = phone.invite(port)
    ok = await phone.final(call_id=call_id)
    assert ok.status == 200
    return ok


async def test_an_answer_never_acked_is_forgotten_without_a_bye(
    endpoint: tuple[SipServer, Calls, SipPeer], monkeypatch: pytest.MonkeyPatch
) -> None:
    server, calls, phone = endpoint
    monkeypatch.setattr(unacked, "ACK_WAIT_S", 0.5)
    ok = await answered(phone, server.port)
    with pytest.raises(TimeoutError):
        await phone.next(timeout_s=1.5)  # no 200 again, and no BYE
    assert calls.legs[0].ended.is_set(), "its RTP socket is closed"
    phone.request("ACK", server.port, call_id=ok.call_id, to_tag=ok.to_tag)
    await asyncio.sleep(0.1)
    assert calls.claimed == [], "an ACK too late claims nothing"


async def test_unacked_answers_are_bounded_for_each_address_and_overall(
    endpoint: tuple[SipServer, Calls, SipPeer], monkeypatch: pytest.MonkeyPatch
) -> None:
    server, calls, phone = endpoint
    monkeypatch.setattr(unacked, "MAX_UNACKED_PER_CLIENT", 3)
    monkeypatch.setattr(unacked, "MAX_UNACKED", 5)
    oks = [await answered(phone, server.port) for _ in range(4)]
    assert [leg.ended.is_set() for leg in calls.legs] == [True, False, False, False]
    other = SipPeer()  # another address: room is made overall, from the oldest
    await asyncio.get_running_loop().create_datagram_endpoint(
        lambda: other, local_addr=("127.0.0.2", 0)
    )
    try:
        oks += [await answered(other, server.port) for _ in range(3)]
    finally:
        other.close()
    assert [leg.ended.is_set() for leg in calls.legs] == [True, True] + [False] * 5
    phone.request("ACK", server.port, call_id=oks[1].call_id, to_tag=oks[1].to_tag)
    phone.request("ACK", server.port, call_id=oks[3].call_id, to_tag=oks[3].to_tag)
    await asyncio.sleep(0.1)
    assert calls.claimed == ["sess_3"], "only an answer still remembered takes a slot"


async def test_a_call_refused_at_its_ack_is_hung_up_with_the_reason(
    endpoint: tuple[SipServer, Calls, SipPeer],
) -> None:
    server, calls, phone = endpoint
    ok = await answered(phone, server.port)
    calls.full = True  # another call took the last slot meanwhile
    phone.request("ACK", server.port, call_id=ok.call_id, to_tag=ok.to_tag)
    bye = await phone.next()
    assert (bye.method, bye.call_id, bye.from_tag) == ("BYE", ok.call_id, ok.to_tag)
    assert bye.get("Reason") == 'SIP;cause=486;text="Busy Here"'
    assert calls.legs[0].ended.is_set()
