"""Request bodies have bounds, and the key is checked before a body is read."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable

import httpx
import pytest
import websockets

from clients import AgentClient
from tests.support.metrics import scrape
from tests.support.server import ServerProcess

MIB = 1024 * 1024


FILE_PART = (
    b'--b\r\nContent-Disposition: form-data; name="sdp"; filename="offer.sdp"\r\n'
    b"Content-Type: application/sdp\r\n\r\n"
)


async def chunks(total: int, size: int = 64 * 1024, first: bytes = b"") -> AsyncIterator[bytes]:
    """A body with no Content-Length (chunked): its size shows only as it arrives."""
    yield first
    sent = len(first)
    while sent < total:
        yield b"x" * size
        sent += size


async def test_bodies_over_the_bound_get_413_and_the_server_goes_on(
    echo_server: ServerProcess,
) -> None:
    async with httpx.AsyncClient(base_url=echo_server.url, timeout=30) as http:
        declared = await http.post(
            "/v1/realtime/calls", content=b"x" * (2 * MIB),
            headers={"content-type": "multipart/form-data; boundary=b"},
        )  # fmt: skip
        # A well-formed multipart file part that goes on and on.
        streamed = await http.post(
            "/v1/realtime/calls", content=chunks(2 * MIB, first=FILE_PART),
            headers={"content-type": "multipart/form-data; boundary=b"},
        )  # fmt: skip
        sdp = await http.post(
            "/v1/realtime/calls", content=chunks(256 * 1024),
            headers={"content-type": "application/sdp"},
        )  # fmt: skip
        offer = await http.post("/offer", content=chunks(512 * 1024),
                                headers={"content-type": "application/json"})  # fmt: skip
        for response in (declared, streamed, sdp, offer):
            assert response.status_code == 413, (response.status_code, response.text)
            assert response.json()["error"]["type"] == "invalid_request_error"
        assert (await http.get("/healthz")).status_code == 200


async def test_the_key_is_checked_before_the_offer_is_read(
    start_server: Callable[..., ServerProcess],
) -> None:
    server = start_server("--agent", "echo", "--server-api-key", "k3y")
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as http:
        # Valid JSON, but an SDP over any offer's size: without the key, 401 comes first.
        big = await http.post("/offer", json={"sdp": "v" * 100_000, "type": "offer"})
        assert big.status_code == 401
        keyed = await http.post("/offer", json={"sdp": "v" * 100_000, "type": "offer"},
                                headers={"Authorization": "Bearer k3y"})  # fmt: skip
        assert keyed.status_code == 400 and "sdp" in keyed.json()["error"]["message"]


async def test_a_multipart_part_that_is_not_utf8_gets_400(echo_server: ServerProcess) -> None:
    async with httpx.AsyncClient(base_url=echo_server.url, timeout=30) as http:
        response = await http.post(
            "/v1/realtime/calls", files={"sdp": ("offer.sdp", b"v=0\xff\xfe", "application/sdp")}
        )
    assert response.status_code == 400
    assert "UTF-8" in response.json()["error"]["message"]


async def test_one_address_making_calls_too_fast_gets_429_and_others_do_not(
    start_server: Callable[..., ServerProcess],
) -> None:
    server = start_server(
        "--agent", "echo", "--limits-calls-per-minute", "6", "--limits-call-burst", "2"
    )  # fmt: skip
    offer = {"sdp": await AgentClient(server.url).offer(), "type": "offer"}
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as http:
        # X-Forwarded-For counts only from a trusted proxy: here it is anyone's to forge.
        answers = [
            await http.post("/offer", json=offer, headers={"X-Forwarded-For": f"198.51.100.{i}"})
            for i in range(3)
        ]
        assert [a.status_code for a in answers] == [200, 200, 429]
        refused = answers[-1]
        assert refused.json()["error"]["type"] == "rate_limit_exceeded"
        assert 1 <= int(refused.headers["retry-after"]) <= 10
        for answer in answers[:2]:
            await http.delete(f"/v1/realtime/calls/{answer.json()['session_id']}")
        # The WebSocket counts too: refused with an error event, then 1008.
        url = server.url.replace("http://", "ws://") + "/v1/realtime"
        async with websockets.connect(url) as ws:
            error = json.loads(await ws.recv())
            assert error["error"]["type"] == "rate_limit_exceeded"
            with pytest.raises(websockets.ConnectionClosed) as closed:
                await ws.recv()
            assert closed.value.rcvd is not None and closed.value.rcvd.code == 1008
        metrics = await scrape(server.url)
        labels = (("outcome", "rate_limited"), ("transport", "webrtc"))
        assert metrics[("voice_agent_calls_total", labels)] == 1
    # Another address has its own allowance.
    other = httpx.AsyncHTTPTransport(local_address="127.0.0.2")
    async with httpx.AsyncClient(base_url=server.url, timeout=30, transport=other) as http:
        answer = await http.post("/offer", json=offer)
        assert answer.status_code == 200, answer.text
        await http.delete(f"/v1/realtime/calls/{answer.json()['session_id']}")


async def test_pages_from_other_origins_cannot_make_calls(
    start_server: Callable[..., ServerProcess],
) -> None:
    server = start_server(
        "--agent", "echo", "--server-allowed-origins", "https://app.example"
    )  # fmt: skip
    host = server.url.removeprefix("http://")
    offer = await AgentClient(server.url).offer()
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as http:

        async def post_from(origin: str) -> httpx.Response:
            # A form POST, which a browser sends cross-site without asking first.
            return await http.post(
                "/v1/realtime/calls", files={"sdp": (None, offer)}, headers={"Origin": origin}
            )

        evil = await post_from("https://evil.example")
        assert evil.status_code == 403 and "evil.example" in evil.json()["error"]["message"]
        assert "access-control-allow-origin" not in evil.headers
        assert (await post_from(f"evil://{host}")).status_code == 403, "this host, not its page"
        own = await post_from(f"http://{host}")
        listed = await post_from("https://app.example")
        assert (own.status_code, listed.status_code) == (201, 201)
        assert listed.headers["access-control-allow-origin"] == "https://app.example"
        assert "location" in listed.headers["access-control-expose-headers"].lower()
        preflight = await http.options(
            "/v1/realtime/calls",
            headers={"Origin": "https://app.example", "Access-Control-Request-Method": "POST",
                     "Access-Control-Request-Headers": "authorization"},
        )  # fmt: skip
        assert preflight.status_code == 200
        assert "POST" in preflight.headers["access-control-allow-methods"]
        for answer in (own, listed):
            call_id = answer.headers["location"].rsplit("/", 1)[-1]
            assert (await http.delete(f"/v1/realtime/calls/{call_id}")).status_code == 200
        # Reading is not changing: a GET from anywhere still answers.
        assert (await http.get("/healthz", headers={"Origin": "https://evil.example"})).is_success


async def test_a_session_in_the_form_that_is_too_much_gets_400(echo_server: ServerProcess) -> None:
    offer = await AgentClient(echo_server.url).offer()
    sessions = {
        "300 KB of instructions": json.dumps({"type": "realtime", "instructions": "i" * 300_000}),
        "nested 3000 deep": '{"type": "realtime", "tools": ' + "[" * 3000 + "]" * 3000 + "}",
    }
    async with httpx.AsyncClient(base_url=echo_server.url, timeout=30) as http:
        for name, session in sessions.items():
            response = await http.post(
                "/v1/realtime/calls", files={"sdp": (None, offer), "session": (None, session)}
            )
            assert response.status_code == 400, (name, response.text)
            assert response.json()["error"]["message"], name
        assert (await http.get("/v1/pool")).json()["in_use"] == 0


async def test_hanging_up_a_call_still_connecting_frees_its_slot_at_once(
    echo_server: ServerProcess,
) -> None:
    offer = await AgentClient(echo_server.url).offer()
    async with httpx.AsyncClient(base_url=echo_server.url, timeout=30) as http:
        made = await http.post(
            "/v1/realtime/calls", content=offer, headers={"content-type": "application/sdp"}
        )
        call_id = made.headers["location"].rsplit("/", 1)[-1]

        async def state() -> str | None:
            slots = (await http.get("/v1/pool")).json()["slots"]
            return next((s["state"] for s in slots if s["session_id"] == call_id), None)

        assert await state() == "connecting"  # the offer's peer never does ICE
        assert (await http.delete(made.headers["location"])).status_code == 200
        # Not after the connect timeout: by the time the DELETE answers.
        assert await state() is None


async def test_behind_a_trusted_proxy_each_forwarded_client_has_its_own_allowance(
    start_server: Callable[..., ServerProcess],
) -> None:
    server = start_server(
        "--agent", "echo", "--limits-calls-per-minute", "6", "--limits-call-burst", "1",
        "--limits-trusted-proxies", "127.0.0.0/8",
    )  # fmt: skip
    offer = {"sdp": await AgentClient(server.url).offer(), "type": "offer"}

    async def post(forwarded_for: str) -> int:
        async with httpx.AsyncClient(base_url=server.url, timeout=30) as http:
            answer = await http.post(
                "/offer", json=offer, headers={"X-Forwarded-For": forwarded_for}
            )
            if answer.status_code == 200:
                await http.delete(f"/v1/realtime/calls/{answer.json()['session_id']}")
            return answer.status_code

    # The client is the last address that is not a proxy: a forged first hop changes nothing.
    assert await post("203.0.113.1") == 200
    assert await post("198.51.100.9, 203.0.113.1") == 429
    assert await post("203.0.113.2, 127.0.0.5") == 200
