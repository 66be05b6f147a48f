"""The SIP endpoint of a real server process, driven by hand-made requests: the call flow,
our BYE, every refusal, digest authentication, malformed and hostile input, and limits.
baresip, a real phone, calls it in tests/e2e/test_sip_phone.py."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import re
import socket
from collections.abc import AsyncIterator, Callable

import httpx
import pytest
import websockets

from app.telephony.sip.auth import digest_fields
from app.telephony.sip.message import SipMessage
from app.telephony.sip.rtp import RtpPacket, build
from app.telephony.sip.sdp import read_offer
from tests.support.pressure import watching
from tests.support.server import ServerProcess, free_udp_port, until_in_use
from tests.support.sip_client import SipPeer

log = logging.getLogger(__name__)


@pytest.fixture
async def phone() -> AsyncIterator[SipPeer]:
    peer = await SipPeer.open()
    yield peer
    peer.close()


def sip_server(start: Callable[..., ServerProcess], *flags: str) -> tuple[ServerProcess, int]:
    port = free_udp_port()
    return start("--agent", "echo", "--sip-port", str(port), *flags), port


def credentials(
    challenge: SipMessage, port: int, *, password: str = "pw", nc: int = 1
) -> list[tuple[str, str]]:
    """An Authorization for alice answering a 401, as a phone computes it (qop=auth)."""
    fields = digest_fields(challenge.get("WWW-Authenticate") or "")
    assert fields is not None and fields["realm"] == "voice-agent" and fields["qop"] == "auth"

    def md5(text: str) -> str:
        return hashlib.md5(text.encode()).hexdigest()

    uri = f"sip:agent@127.0.0.1:{port}"
    ha1, ha2 = md5(f"alice:voice-agent:{password}"), md5(f"INVITE:{uri}")
    response = md5(f"{ha1}:{fields['nonce']}:{nc:08x}:xyz:auth:{ha2}")
    return [("Authorization", f'Digest username="alice", realm="voice-agent", '
             f'nonce="{fields["nonce"]}", uri="{uri}", response="{response}", '
             f'qop=auth, nc={nc:08x}, cnonce="xyz"')]  # fmt: skip


async def test_a_call_is_answered_acked_and_hung_up_by_us(
    start_server: Callable[..., ServerProcess], phone: SipPeer
) -> None:
    server, port = sip_server(start_server)
    call_id, _ = phone.invite(port)
    ok = await phone.final()  # after 100 Trying only if the answer took over 200 ms
    assert (ok.status, ok.call_id) == (200, call_id) and ok.to_tag and ok.get("Contact")
    answer = read_offer(ok.body.decode())
    assert (answer.payload_type, answer.dtmf_payload_type, answer.address) == (0, 101, "127.0.0.1")
    assert (await until_in_use(server.url, 0))["in_use"] == 0, "no slot before the ACK"
    phone.request("ACK", port, call_id=call_id, to_tag=ok.to_tag)
    pool = await until_in_use(server.url, 1, state="active")
    (slot,) = [slot for slot in pool["slots"] if slot["transport"] == "sip"]
    # Hanging up from our side (here through the HTTP API) sends the caller a BYE.
    async with httpx.AsyncClient() as http:
        hangup = await http.delete(f"{server.url}/v1/realtime/calls/{slot['session_id']}")
    assert hangup.status_code == 200
    bye = await phone.next()
    assert (bye.method, bye.call_id, bye.from_tag, bye.to_tag) == (
        "BYE", call_id, ok.to_tag, "tester",
    )  # fmt: skip
    assert (await until_in_use(server.url, 0))["in_use"] == 0


async def test_without_an_ack_the_answer_is_sent_once_for_each_invite(
    start_server: Callable[..., ServerProcess], phone: SipPeer
) -> None:
    """Not on timer G, as RFC 3261 has it: a source is not verified until it ACKs. The
    caller's own retransmissions recover a lost 200, as they do a lost refusal."""
    server, port = sip_server(start_server)
    call_id, branch = phone.invite(port)
    ok = await phone.final()
    assert ok.status == 200
    with pytest.raises(TimeoutError):
        await phone.final(timeout_s=2.0)  # timer G would have sent it at 0.5 and 1.5 s
    # The caller, missing it, sends its INVITE again: the same 200, the same call.
    phone.invite(port, call_id=call_id, branch=branch)
    again = await phone.final(call_id=call_id)
    assert (again.status, again.to_tag, again.body) == (200, ok.to_tag, ok.body)
    assert (await until_in_use(server.url, 0))["in_use"] == 0, "no slot before the ACK"
    phone.request("ACK", port, call_id=call_id, to_tag=ok.to_tag)
    await until_in_use(server.url, 1, state="active")


async def test_refusals_no_common_codec_full_pool_and_retransmissions(
    start_server: Callable[..., ServerProcess], phone: SipPeer
) -> None:
    server, port = sip_server(start_server, "--max-sessions", "1")
    no_codec, branch = phone.invite(port, formats="9")
    refused = await phone.final(call_id=no_codec)
    assert refused.status == 488 and "no common codec" in (refused.get("Warning") or "")
    phone.request("ACK", port, call_id=no_codec, branch=branch, to_tag=refused.to_tag)
    first, _ = phone.invite(port)
    answered = await phone.final(call_id=first)
    assert answered.status == 200
    phone.request("ACK", port, call_id=first, to_tag=answered.to_tag)
    second, branch = phone.invite(port)
    busy = await phone.next()  # decided at once: no 100 Trying before it
    assert (busy.status, busy.call_id) == (486, second) and int(busy.get("Retry-After") or 0) >= 1
    # Sent once, not on timer G (to a source no one verified, a refusal is one packet
    # for one), and again for the caller's retransmitted INVITE.
    with pytest.raises(TimeoutError):
        await phone.next(timeout_s=1.0)
    phone.request("INVITE", port, call_id=second, branch=branch, body=b"")
    again = await phone.next()
    assert (again.status, again.call_id, again.to_tag) == (486, second, busy.to_tag)
    phone.request("ACK", port, call_id=second, branch=branch, to_tag=busy.to_tag)
    # The first call hangs up, and the next caller gets its slot.
    phone.request("BYE", port, call_id=first, cseq=2, to_tag=answered.to_tag)
    assert (await phone.final(call_id=first, cseq=2)).status == 200
    await until_in_use(server.url, 0)
    third, _ = phone.invite(port)
    assert (await phone.final(call_id=third)).status == 200


async def test_bye_from_the_caller_frees_the_slot_and_unknown_dialogs_get_481(
    start_server: Callable[..., ServerProcess], phone: SipPeer
) -> None:
    server, port = sip_server(start_server)
    call_id, _ = phone.invite(port)
    ok = await phone.final()
    phone.request("ACK", port, call_id=call_id, to_tag=ok.to_tag)
    await until_in_use(server.url, 1, state="active")
    bye = phone.request("BYE", port, call_id=call_id, cseq=2, to_tag=ok.to_tag)
    assert (await phone.final(call_id=call_id, cseq=2)).status == 200
    await until_in_use(server.url, 0)
    phone.send(bye, port)  # our 200 was lost, say: the same BYE gets the same answer
    assert (await phone.final(call_id=call_id, cseq=2)).status == 200
    phone.request("BYE", port, call_id=call_id, cseq=3, to_tag=ok.to_tag)
    assert (await phone.final(call_id=call_id, cseq=3)).status == 481, "that call is over"
    phone.request("CANCEL", port, call_id="nobody")
    assert (await phone.final()).status == 481


async def test_malformed_sip_gets_400_and_the_endpoint_goes_on(
    start_server: Callable[..., ServerProcess], phone: SipPeer
) -> None:
    # A call in progress, which none of this may disturb (it sends no RTP: no media timeout).
    server, port = sip_server(start_server, "--pool-media-timeout-s", "120")
    call_id, _ = phone.invite(port)
    ok = await phone.final(call_id=call_id)
    phone.request("ACK", port, call_id=call_id, to_tag=ok.to_tag)
    await until_in_use(server.url, 1, state="active")
    good = phone.request("OPTIONS", port, call_id="c1")
    assert (await phone.final(call_id="c1")).status == 200
    phone.send(good.replace(b"CSeq: 1 OPTIONS", b"CSeq: one OPTIONS"), port)
    bad = await phone.final()
    assert bad.status == 400 and "CSeq" in bad.reason
    phone.send(good.replace(b"Max-Forwards: 70", b"Max Forwards"), port)
    assert (await phone.final()).status == 400
    phone.send(b"\x00\xff garbage \r\n\r\n", port)  # nothing to answer to
    phone.send(b"HELLO WORLD\r\n\r\n", port)
    phone.request("REGISTER", port, call_id="c2")
    unsupported = await phone.final()
    assert unsupported.status == 405 and "INVITE" in (unsupported.get("Allow") or "")
    phone.request("OPTIONS", port, call_id="c3")
    options = await phone.final()
    assert (options.status, options.call_id) == (200, "c3"), "still serving"
    with pytest.raises(TimeoutError):
        await phone.next(timeout_s=0.5)  # the garbage got no answer at all
    pool = (await until_in_use(server.url, 1, state="active"))["slots"]
    assert [slot["transport"] for slot in pool if slot["state"] == "active"] == ["sip"]
    phone.request("BYE", port, call_id=call_id, cseq=2, to_tag=ok.to_tag)
    assert (await phone.final(call_id=call_id, cseq=2)).status == 200, "the call went on"


async def test_digest_authentication_and_the_allowlist(
    start_server: Callable[..., ServerProcess], phone: SipPeer
) -> None:
    _, port = sip_server(start_server, "--sip-username", "alice", "--sip-password", "pw")
    call_id, _ = phone.invite(port)
    challenge = await phone.final()
    assert challenge.status == 401
    wrong = credentials(challenge, port, password="wrong")
    phone.invite(port, call_id=call_id, cseq=2, headers=wrong)
    assert (await phone.final(call_id=call_id, cseq=2)).status == 401
    phone.invite(port, call_id=call_id, cseq=3, headers=credentials(challenge, port))
    ok = await phone.final(call_id=call_id, cseq=3)
    assert ok.status == 200
    phone.request("ACK", port, call_id=call_id, cseq=3, to_tag=ok.to_tag)

    # Outside the allowlist, nothing is read, so nothing is answered.
    _, closed = sip_server(start_server, "--sip-allow", "10.0.0.0/8")
    phone.invite(closed)
    phone.request("OPTIONS", closed, call_id="ping")
    with pytest.raises(TimeoutError):
        await phone.next(timeout_s=1.0)


async def test_a_captured_authorization_does_not_make_another_call(
    start_server: Callable[..., ServerProcess], phone: SipPeer
) -> None:
    """The probe's replay: one captured Authorization answered 4 of 4 new calls from
    other ports. Its nonce is for that call from that address, and its nc counts once."""
    server, port = sip_server(start_server, "--sip-username", "alice", "--sip-password", "pw")
    call_id, _ = phone.invite(port)
    captured = credentials(await phone.final(), port)
    phone.invite(port, call_id=call_id, cseq=2, headers=captured)
    ok = await phone.final(call_id=call_id, cseq=2)
    assert ok.status == 200
    phone.request("BYE", port, call_id=call_id, cseq=3, to_tag=ok.to_tag)
    assert (await phone.final(call_id=call_id, cseq=3)).status == 200
    await until_in_use(server.url, 0)
    thief = await SipPeer.open()
    try:
        for _ in range(4):  # new calls from another port
            replay, _ = thief.invite(port, headers=captured)
            assert (await thief.final(call_id=replay)).status == 401
        thief.invite(port, call_id=call_id, cseq=4, headers=captured)  # even the same call
        assert (await thief.final(call_id=call_id)).status == 401
    finally:
        thief.close()
    assert (await until_in_use(server.url, 0))["in_use"] == 0


async def test_keys_sent_by_sip_info_reach_the_session(
    start_server: Callable[..., ServerProcess], phone: SipPeer
) -> None:
    """Some PBXes send keypad presses as SIP INFO (application/dtmf-relay), not RTP. A
    sideband controller sees them, as it would see RFC 4733 presses."""
    server, port = sip_server(start_server)
    call_id, _ = phone.invite(port)
    ok = await phone.final()
    phone.request("ACK", port, call_id=call_id, to_tag=ok.to_tag)
    pool = await until_in_use(server.url, 1, state="active")
    session_id = next(s["session_id"] for s in pool["slots"] if s["transport"] == "sip")
    async with websockets.connect(
        f"ws://127.0.0.1:{server.port}/v1/realtime?call_id={session_id}"
    ) as sideband:
        await sideband.recv()  # session.created
        phone.request("INFO", port, call_id=call_id, cseq=2, to_tag=ok.to_tag,
                      headers=[("Content-Type", "application/dtmf-relay")],
                      body=b"Signal=7\r\nDuration=160\r\n")  # fmt: skip
        assert (await phone.final()).status == 200
        async with asyncio.timeout(10):
            while True:
                event = await sideband.recv()
                if '"input_audio_buffer.dtmf_event_received"' in str(event):
                    break
    assert re.search(r'"event":\s*"7"', str(event))


async def test_a_refusal_is_one_packet_for_each_request(
    start_server: Callable[..., ServerProcess], phone: SipPeer
) -> None:
    """Amplification: 401s and 486s went out on timer G, to sources nobody verified, ×6
    the packets and ×3.4 the bytes of an INVITE flood. Now one packet answers one."""
    _, port = sip_server(start_server, "--sip-username", "alice", "--sip-password", "pw")
    sent = [phone.invite(port) for _ in range(10)]
    await asyncio.sleep(2.0)  # timer G would have sent each again at 0.5 and 1.5 s
    answers: list[SipMessage] = []
    with pytest.raises(TimeoutError):
        while True:
            answers.append(await phone.next(timeout_s=0.5))
    assert [m.status for m in answers] == [401] * 10
    assert {m.call_id for m in answers} == {call_id for call_id, _ in sent}
    # A retransmitted INVITE is answered from memory: the same 401, once.
    call_id, branch = sent[0]
    phone.invite(port, call_id=call_id, branch=branch)
    again = await phone.next()
    assert again.get("WWW-Authenticate") == answers[0].get("WWW-Authenticate")
    with pytest.raises(TimeoutError):
        await phone.next(timeout_s=0.7)


async def test_a_reinvite_outside_the_dialog_gets_481(
    start_server: Callable[..., ServerProcess], phone: SipPeer
) -> None:
    _, port = sip_server(start_server)
    call_id, _ = phone.invite(port)
    ok = await phone.final(call_id=call_id)
    phone.request("ACK", port, call_id=call_id, to_tag=ok.to_tag)
    phone.invite(port, call_id=call_id, cseq=2, to_tag="not-ours")
    assert (await phone.final(call_id=call_id, cseq=2)).status == 481
    phone.invite(port, call_id=call_id, cseq=3, to_tag=ok.to_tag)
    refreshed = await phone.final(call_id=call_id, cseq=3)
    assert refreshed.status == 200 and refreshed.body == ok.body, "the same media, refreshed"


async def test_hostile_headers_do_not_stall_the_server(
    start_server: Callable[..., ServerProcess], phone: SipPeer
) -> None:
    """The probe's high: one INVITE with a 60 KB Authorization froze HTTP, WebRTC and SIP
    for 47 s (1.3 s at 8 KB, 13.7 s at 32 KB). /readyz must answer within 1 s throughout,
    and a real call still goes through after."""
    server, port = sip_server(start_server, "--sip-username", "alice", "--sip-password", "pw")
    hostile = [
        ("Authorization", "Digest " + "a" * 60_000),  # refused by its size
        ("Authorization", "Digest " + "a" * 4_000),  # under it: read, and refused
        ("Authorization", 'Digest a="' + "x" * 4_000),
        ("Authorization", "Digest " + "a=b " * 1_000),
        ("Contact", "<" * 60_000),
        ("Contact", "<" * 8_000),
        ("Via", "SIP/2.0/UDP x" + ";" * 60_000),
        ("X-Folded", "a" + "\r\n b" * 20_000),
    ]
    async with watching(server) as pressure:
        for _ in range(3):
            for name, value in hostile:
                phone.invite(port, headers=[(name, value)])
            await asyncio.sleep(0.1)
        await asyncio.sleep(1.0)
        call_id, _ = phone.invite(port)
        challenge = await phone.final(call_id=call_id)
        phone.invite(port, call_id=call_id, cseq=2, headers=credentials(challenge, port))
        assert (await phone.final(call_id=call_id, cseq=2)).status == 200, "still answering"
    log.info("hostile SIP headers: %s", pressure)
    assert pressure.worst_readyz_s < 1.0, f"the event loop stalled: {pressure}"
    assert pressure.grown_mb < 200, pressure


async def test_calls_from_one_address_are_limited_unless_it_is_vouched_for(
    start_server: Callable[..., ServerProcess], phone: SipPeer
) -> None:
    """An open SIP port is held to the rate of new calls and the share of the slots one
    address may have, as HTTP is; a trunk on sip.allow carries many callers and is not."""
    limits = ("--max-sessions", "4", "--limits-address-slots", "0.5",
              "--limits-calls-per-minute", "6", "--limits-call-burst", "3")  # fmt: skip
    _, port = sip_server(start_server, *limits)
    for _ in range(2):
        call_id, _ = phone.invite(port)
        assert (await phone.final(call_id=call_id)).status == 200
    held, _ = phone.invite(port)  # a third at once: two of four is this address's share
    busy = await phone.final(call_id=held)
    assert busy.status == 486 and int(busy.get("Retry-After") or 0) >= 1
    assert "already holds 2 calls" in (busy.get("Warning") or "")
    fast, _ = phone.invite(port)  # a fourth: past the burst of 3
    limited = await phone.final(call_id=fast)
    assert limited.status == 503 and int(limited.get("Retry-After") or 0) >= 1
    assert "too many new calls" in (limited.get("Warning") or "")

    _, trunk = sip_server(start_server, *limits, "--sip-allow", "127.0.0.0/8")
    for _ in range(4):
        call_id, _ = phone.invite(trunk)
        assert (await phone.final(call_id=call_id)).status == 200


async def test_rtp_goes_only_to_the_caller_after_its_ack_and_first_packet(
    start_server: Callable[..., ServerProcess], phone: SipPeer
) -> None:
    """Reflection: an INVITE naming another port, never ACKed, made the server stream RTP
    there. Hijack: a stranger's first packet took the agent's audio. 127.0.0.2 is the
    stranger here; the caller signals, and sends RTP, from 127.0.0.1."""
    _, port = sip_server(start_server)
    victim, caller, stranger = (UdpCounter(ip) for ip in ("127.0.0.1", "127.0.0.1", "127.0.0.2"))
    try:
        call_id, _ = phone.invite(port, rtp_port=victim.port)
        ok = await phone.final(call_id=call_id)
        rtp = read_offer(ok.body.decode()).port
        await asyncio.sleep(1.5)
        assert victim.count() == 0, "nothing before the ACK"
        phone.request("ACK", port, call_id=call_id, to_tag=ok.to_tag)
        stranger.send_rtp(rtp)
        await asyncio.sleep(0.5)
        assert victim.count() == stranger.count() == 0, "nor before the caller's own RTP"
        caller.send_rtp(rtp)
        await asyncio.sleep(0.5)
        assert caller.count() >= 10, "the agent's 20 ms packets, to where the caller's came from"
        assert victim.count() == stranger.count() == 0
    finally:
        for each in (victim, caller, stranger):
            each.sock.close()


class UdpCounter:
    def __init__(self, host: str) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind((host, 0))
        self.sock.setblocking(False)
        self.port = int(self.sock.getsockname()[1])

    def send_rtp(self, port: int) -> None:
        self.sock.sendto(build(RtpPacket(0, 1, 160, 0x5EED, b"\xff" * 160)), ("127.0.0.1", port))

    def count(self) -> int:
        received = 0
        with contextlib.suppress(BlockingIOError):
            while self.sock.recv(2048):
                received += 1
        return received
