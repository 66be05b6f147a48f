"""The SIP endpoint of a real server under the attacks a hostile probe made, each while a
normal call is made: what the attack costs the server (the slowest /readyz under 1 s, RSS
growth under 200 MB, as in tests/e2e/test_live_floods.py) and what it gets back. The
hostile headers one is in test_server.py. Loopback has many addresses: each test says
which is whose."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import socket
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any

import httpx
import pytest

from app.telephony.sip.message import SipMessage
from tests.support.pressure import Pressure, watching
from tests.support.server import ServerProcess, free_udp_port, until_in_use
from tests.support.sip_client import SipPeer
from tests.telephony.sip.test_incoming import Hook

log = logging.getLogger(__name__)

KEY = "s3cret"


async def peer_at(host: str) -> SipPeer:
    """A SIP peer on one loopback address (SipPeer.open takes 127.0.0.1)."""
    peer = SipPeer()
    loop = asyncio.get_running_loop()
    await loop.create_datagram_endpoint(lambda: peer, local_addr=(host, 0))
    return peer


@pytest.fixture
async def peers() -> AsyncIterator[Callable[[str], object]]:
    opened: list[SipPeer] = []

    async def open_at(host: str) -> SipPeer:
        opened.append(peer := await peer_at(host))
        return peer

    yield open_at
    for peer in opened:
        peer.close()


def sip_server(start: Callable[..., ServerProcess], *flags: str) -> tuple[ServerProcess, int]:
    port = free_udp_port()
    return start("--agent", "echo", "--sip-port", str(port), *flags), port


async def normal_call(server: ServerProcess, caller: SipPeer, port: int) -> None:
    """A call answered, ACKed, up, and hung up by the caller."""
    call_id, _ = caller.invite(port)
    ok = await caller.final(call_id=call_id)
    assert ok.status == 200, f"a normal call got {ok.status} {ok.reason}"
    caller.request("ACK", port, call_id=call_id, to_tag=ok.to_tag)
    pool = await until_in_use(server.url, 1, state="active", key=KEY)
    assert [s["transport"] for s in pool["slots"] if s["state"] == "active"] == ["sip"]
    caller.request("BYE", port, call_id=call_id, cseq=2, to_tag=ok.to_tag)
    assert (await caller.final(call_id=call_id, cseq=2)).status == 200


@contextlib.asynccontextmanager
async def running(attack: Coroutine[Any, Any, None]) -> AsyncIterator[asyncio.Task[None]]:
    """The attack, in the background of the block; stopped if the block fails."""
    task = asyncio.create_task(attack)
    try:
        yield task
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def within_limits(pressure: Pressure, attack: str) -> None:
    log.info("%s: %s", attack, pressure)
    assert pressure.worst_readyz_s < 1.0, f"the event loop stalled: {pressure}"
    assert pressure.grown_mb < 200, pressure


def drain(peer: SipPeer) -> list[SipMessage]:
    got = []
    while not peer.received.empty():
        got.append(peer.received.get_nowait())
    return got


# One datagram of 64 KiB: a header folded over 32,000 lines; the emoji makes each copy of
# the growing line four bytes a character.
FOLDED = (
    "INVITE sip:agent@127.0.0.1 SIP/2.0\r\nX-Folded: \U0001f600" + "\n " * 32_700 + "\r\n\r\n"
).encode()


async def test_folded_headers_from_outside_the_allowlist_are_not_read(
    start_server: Callable[..., ServerProcess], peers: Callable[[str], object]
) -> None:
    """The probe's high: 64 KB datagrams of folded header lines, 40 a second, from
    outside --sip-allow: unfolding was quadratic (52 ms a datagram) and ran before the
    allowlist was checked; /readyz took 7.1 s. 127.0.0.1 attacks; 127.0.0.2, allowed,
    calls meanwhile."""
    assert len(FOLDED) <= 64 * 1024
    server, port = sip_server(start_server, "--sip-allow", "127.0.0.2/32")
    caller: SipPeer = await peers("127.0.0.2")  # type: ignore[assignment]
    attacker = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    attacker.bind(("127.0.0.1", 0))
    attacker.setblocking(False)

    async def attack() -> None:
        for _ in range(160):  # 4 s at 40 a second
            attacker.sendto(FOLDED, ("127.0.0.1", port))
            await asyncio.sleep(0.025)

    try:
        async with watching(server) as pressure, running(attack()) as attacking:
            await asyncio.sleep(1.5)
            await normal_call(server, caller, port)
            await attacking
        with pytest.raises(BlockingIOError):
            attacker.recv(2048)  # nor was it answered
    finally:
        attacker.close()
    within_limits(pressure, "folded headers from outside sip.allow")


async def test_forged_invites_hold_no_slot_and_get_one_answer_each(
    start_server: Callable[..., ServerProcess], peers: Callable[[str], object]
) -> None:
    """The probe's high: 8 forged INVITEs a second from an address in --sip-allow (a
    trunk's, which has no share of its own) held every slot until connect_timeout_s, so
    normal calls were refused; and each drew 5 × 200 OK and 11 BYEs to the forged source.
    The forger here is 127.0.0.1 at a port that never ACKs; the normal caller is at the
    same address."""
    server, port = sip_server(start_server, "--sip-allow", "127.0.0.0/8", "--max-sessions",
                              "2", "--server-api-key", KEY)  # fmt: skip
    forger: SipPeer = await peers("127.0.0.1")  # type: ignore[assignment]
    caller: SipPeer = await peers("127.0.0.1")  # type: ignore[assignment]
    forged: list[str] = []
    in_use: list[int] = []

    async def attack() -> None:
        async with httpx.AsyncClient(headers={"Authorization": f"Bearer {KEY}"}) as http:
            for _ in range(32):  # 4 s at 8 a second
                forged.append(forger.invite(port)[0])
                await asyncio.sleep(0.125)
                in_use.append((await http.get(f"{server.url}/v1/pool")).json()["in_use"])

    async with watching(server) as pressure, running(attack()) as attacking:
        await asyncio.sleep(1.5)
        await normal_call(server, caller, port)
        await attacking
        await asyncio.sleep(2.0)  # timer G would have sent each 200 again by now
    within_limits(pressure, "forged INVITEs")
    got = drain(forger)
    finals = [m for m in got if m.status >= 200]
    assert sorted(m.call_id for m in finals) == sorted(forged), "one answer for each"
    assert {m.status for m in finals} == {200}
    assert not [m for m in got if m.method], "no BYE for a dialog never confirmed"
    assert max(in_use) <= 1, f"slots held by forged INVITEs: {in_use}"


async def test_an_address_is_held_to_its_rate_and_share_before_its_calls_ring(
    start_server: Callable[..., ServerProcess], peers: Callable[[str], object]
) -> None:
    """The probe's medium: 50 INVITEs a second from one address each rang, posting a
    webhook, until 64 calls rang at once; then 14 of 15 normal calls got 503 "too many
    calls are waiting". Its rate and share of the slots now apply before a call rings.
    127.0.0.1 floods; 127.0.0.2 calls, and the application accepts its call."""
    hook = Hook()
    limits = ("--max-sessions", "4", "--limits-address-slots", "0.5",
              "--limits-calls-per-minute", "60", "--limits-call-burst", "5")  # fmt: skip
    try:
        server, port = sip_server(start_server, *limits, "--server-api-key", KEY,
                                  "--sip-webhook-url", hook.url)  # fmt: skip
        flooder: SipPeer = await peers("127.0.0.1")  # type: ignore[assignment]
        caller: SipPeer = await peers("127.0.0.2")  # type: ignore[assignment]

        async def flood() -> None:
            for _ in range(100):  # 2 s at 50 a second
                flooder.invite(port)
                await asyncio.sleep(0.02)

        async with watching(server) as pressure, running(flood()) as flooding:
            await asyncio.sleep(1.7)  # 85 sent: more than the 64 that may ring at once
            call_id, _ = caller.invite(port)
            session_id = await offered(hook, caller, call_id)
            async with httpx.AsyncClient(headers={"Authorization": f"Bearer {KEY}"}) as http:
                accepted = await http.post(f"{server.url}/live/sessions/{session_id}/accept",
                                           json={"session": {"model": "gpt-live-1"}})  # fmt: skip
            assert accepted.status_code == 200, accepted.text
            ok = await caller.final(call_id=call_id)
            assert ok.status == 200, f"the normal call got {ok.status} {ok.reason}"
            caller.request("ACK", port, call_id=call_id, to_tag=ok.to_tag)
            await until_in_use(server.url, 1, state="active", key=KEY)
            await flooding
        within_limits(pressure, "an INVITE flood, offered to a webhook")
        refused = [m for m in drain(flooder) if m.status >= 200]
        assert {m.status for m in refused} <= {486, 503}, {m.status for m in refused}
        assert len(refused) >= 90, "the rest refused at once, not rung"
        flooded = [body for body, _ in hook.received if call_id.encode() not in body]
        assert len(flooded) <= 2, f"{len(flooded)} webhooks for one address: its share is 2"
    finally:
        hook.stop()


async def offered(hook: Hook, caller: SipPeer, call_id: str, timeout_s: float = 5) -> str:
    """The session id of the call `call_id`, from the webhook that offered it; an
    AssertionError if the caller is refused first. What the caller got meanwhile (100,
    180) is read."""
    async with asyncio.timeout(timeout_s):
        while True:
            for body, _ in list(hook.received):
                if call_id.encode() in body:
                    return str(json.loads(body)["data"]["session_id"])
            for message in drain(caller):
                assert message.status < 200, f"refused: {message.status} {message.reason}"
            await asyncio.sleep(0.02)


async def test_accepting_a_call_whose_caller_cancelled_is_too_late(
    start_server: Callable[..., ServerProcess], phone: SipPeer
) -> None:
    """The probe's low: accepting after the caller's CANCEL answered 200 and claimed a
    slot, then 487 and a hang-up followed. The docs say 409."""
    hook = Hook()
    try:
        server, port = sip_server(start_server, "--server-api-key", KEY,
                                  "--sip-webhook-url", hook.url)  # fmt: skip
        call_id, branch = phone.invite(port)
        session_id = await offered(hook, phone, call_id)
        phone.request("CANCEL", port, call_id=call_id, branch=branch)
        assert (await phone.final(call_id=call_id)).cseq == (1, "CANCEL")
        assert (await phone.final(call_id=call_id)).status == 487
        async with httpx.AsyncClient(headers={"Authorization": f"Bearer {KEY}"}) as http:
            late = await http.post(f"{server.url}/live/sessions/{session_id}/accept",
                                   json={"session": {"model": "gpt-live-1"}})  # fmt: skip
        assert late.status_code == 409 and "caller hung up" in late.text, late.text
        assert (await until_in_use(server.url, 0, key=KEY))["in_use"] == 0
    finally:
        hook.stop()


@pytest.fixture
async def phone() -> AsyncIterator[SipPeer]:
    peer = await SipPeer.open()
    yield peer
    peer.close()
