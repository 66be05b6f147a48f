"""The SIP endpoint of a real server process, driven by hand-made requests: the call flow,
our BYE, every refusal, digest authentication, and malformed input. baresip, a real
phone, calls it in tests/e2e/test_sip_phone.py."""

from __future__ import annotations

import asyncio
import hashlib
import re
from collections.abc import AsyncIterator, Callable

import httpx
import pytest
import websockets

from app.sip.auth import FIELD
from app.sip.sdp import read_offer
from tests.support.server import ServerProcess, free_udp_port, until_in_use
from tests.support.sip_client import SipPeer


@pytest.fixture
async def phone() -> AsyncIterator[SipPeer]:
    peer = await SipPeer.open()
    yield peer
    peer.close()


def sip_server(start: Callable[..., ServerProcess], *flags: str) -> tuple[ServerProcess, int]:
    port = free_udp_port()
    return start("--agent", "echo", "--sip-port", str(port), *flags), port


async def test_a_call_is_answered_acked_and_hung_up_by_us(
    start_server: Callable[..., ServerProcess], phone: SipPeer
) -> None:
    server, port = sip_server(start_server)
    call_id, _ = phone.invite(port)
    trying = await phone.next()
    assert (trying.status, trying.call_id) == (100, call_id)
    ok = await phone.final()
    assert ok.status == 200 and ok.to_tag and ok.get("Contact")
    answer = read_offer(ok.body.decode())
    assert (answer.payload_type, answer.dtmf_payload_type, answer.address) == (0, 101, "127.0.0.1")
    pool = await until_in_use(server.url, 1)
    (slot,) = [slot for slot in pool["slots"] if slot["transport"] == "sip"]
    phone.request("ACK", port, call_id=call_id, to_tag=ok.to_tag)
    await until_in_use(server.url, 1, state="active")
    # Hanging up from our side (here through the HTTP API) sends the caller a BYE.
    async with httpx.AsyncClient() as http:
        hangup = await http.delete(f"{server.url}/v1/realtime/calls/{slot['session_id']}")
    assert hangup.status_code == 200
    bye = await phone.next()
    assert (bye.method, bye.call_id, bye.from_tag, bye.to_tag) == (
        "BYE", call_id, ok.to_tag, "tester",
    )  # fmt: skip
    assert (await until_in_use(server.url, 0))["in_use"] == 0


async def test_without_an_ack_the_answer_is_repeated(
    start_server: Callable[..., ServerProcess], phone: SipPeer
) -> None:
    server, port = sip_server(start_server)
    call_id, branch = phone.invite(port)
    finals = [await phone.final() for _ in range(3)]  # at 0, 0.5 and 1.5 s
    assert [m.status for m in finals] == [200, 200, 200]
    assert len({m.to_tag for m in finals}) == 1, "the same answer, not new dialogs"
    # The caller, missing them all, sends its INVITE again: the same 200, the same call.
    phone.invite(port, call_id=call_id, branch=branch)
    again = await phone.final(call_id=call_id)
    assert (again.status, again.to_tag) == (200, finals[0].to_tag)
    assert (await until_in_use(server.url, 1))["in_use"] == 1


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
    busy = await phone.final(call_id=second)
    assert busy.status == 486 and int(busy.get("Retry-After") or 0) >= 1
    # Until the ACK it comes again (timer G), and for a retransmitted INVITE too.
    assert (await phone.final(call_id=second)).to_tag == busy.to_tag
    phone.request("INVITE", port, call_id=second, branch=branch, body=b"")
    again = await phone.final(call_id=second)
    assert (again.status, again.to_tag) == (486, busy.to_tag)
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
    fields = {m[1]: m[2] or m[3] for m in FIELD.finditer(challenge.get("WWW-Authenticate") or "")}
    assert fields["realm"] == "voice-agent" and fields["qop"] == "auth"

    def md5(text: str) -> str:
        return hashlib.md5(text.encode()).hexdigest()

    def credentials(password: str) -> list[tuple[str, str]]:
        uri = f"sip:agent@127.0.0.1:{port}"
        ha1, ha2 = md5(f"alice:voice-agent:{password}"), md5(f"INVITE:{uri}")
        response = md5(f"{ha1}:{fields['nonce']}:00000001:xyz:auth:{ha2}")
        return [("Authorization", f'Digest username="alice", realm="voice-agent", '
                 f'nonce="{fields["nonce"]}", uri="{uri}", response="{response}", '
                 'qop=auth, nc=00000001, cnonce="xyz"')]  # fmt: skip

    phone.invite(port, call_id=call_id, cseq=2, headers=credentials("wrong"))
    assert (await phone.final(call_id=call_id, cseq=2)).status == 401
    phone.invite(port, call_id=call_id, cseq=3, headers=credentials("pw"))
    assert (await phone.final(call_id=call_id, cseq=3)).status == 200

    _, closed = sip_server(start_server, "--sip-allow", "10.0.0.0/8")
    refused, _ = phone.invite(closed)
    assert (await phone.final(call_id=refused)).status == 403


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
