"""Signalling against a real server process: answers, refusals, and that it keeps serving."""

from __future__ import annotations

from collections.abc import Callable

import httpx
import pytest
from aiortc import RTCPeerConnection

from clients import AgentClient
from tests.support.server import ServerProcess, until_in_use


async def video_only_offer() -> str:
    pc = RTCPeerConnection()
    pc.addTransceiver("video")
    await pc.setLocalDescription(await pc.createOffer())
    sdp = pc.localDescription.sdp
    await pc.close()
    return sdp


async def post_offer(url: str, **kwargs: object) -> httpx.Response:
    async with httpx.AsyncClient(timeout=20) as http:
        return await http.post(f"{url}/offer", **kwargs)  # type: ignore[arg-type]


async def test_healthz_and_pool_shape(echo_server: ServerProcess) -> None:
    async with httpx.AsyncClient() as http:
        assert (await http.get(f"{echo_server.url}/healthz")).json()["status"] == "ok"
        pool = (await http.get(f"{echo_server.url}/v1/pool")).json()
        index = (await http.get(f"{echo_server.url}/")).text
    assert pool["size"] == 4 and len(pool["slots"]) == 4
    assert {slot["state"] for slot in pool["slots"]} <= {"idle", "connecting", "active"}
    assert 'id="connect"' in index


@pytest.mark.parametrize(
    "request_kwargs",
    [
        {"content": b"{not json", "headers": {"content-type": "application/json"}},
        {"json": {"type": "offer"}},
        {"json": {"sdp": "v=0\r\n", "type": "answer"}},
        {"json": {"sdp": "hello", "type": "offer"}},
        {"json": {"sdp": "v=0\r\no=- 1 1 IN IP4 0.0.0.0\r\ns=-\r\nt=0 0\r\n", "type": "offer"}},
    ],
    ids=["malformed-json", "missing-sdp", "not-an-offer", "not-sdp", "no-media"],
)
async def test_bad_offers_get_400_with_a_json_error(
    echo_server: ServerProcess, request_kwargs: dict[str, object]
) -> None:
    response = await post_offer(echo_server.url, **request_kwargs)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["type"] == "invalid_request_error" and error["message"]


async def test_offer_without_audio_is_refused_and_the_server_keeps_serving(
    echo_server: ServerProcess,
) -> None:
    response = await post_offer(
        echo_server.url, json={"sdp": await video_only_offer(), "type": "offer"}
    )
    assert response.status_code == 400
    assert "audio" in response.json()["error"]["message"]
    client = AgentClient(echo_server.url)
    try:
        await client.connect()
        assert client.of_type("session.created")[0]["session"]["id"] == client.session_id
    finally:
        await client.close()


async def test_full_pool_answers_503_with_retry_after(
    start_server: Callable[..., ServerProcess],
) -> None:
    server = start_server("--agent", "echo", "--max-sessions", "1")
    first = AgentClient(server.url)
    await first.connect()
    try:
        second = AgentClient(server.url)
        response = await post_offer(server.url, json={"sdp": await second.offer(), "type": "offer"})
        await second.close()
        assert response.status_code == 503
        assert int(response.headers["retry-after"]) >= 1
        error = response.json()["error"]
        assert error["type"] == "session_limit_reached"
        assert "1 session slots are in use" in error["message"]
        async with httpx.AsyncClient() as http:
            assert (await http.get(f"{server.url}/readyz")).status_code == 503
    finally:
        await first.close()
    # The slot comes back once the first peer hangs up.
    await until_in_use(server.url, 0)
    third = AgentClient(server.url)
    try:
        await third.connect()
    finally:
        await third.close()


async def test_an_api_key_is_required_once_configured(
    start_server: Callable[..., ServerProcess],
) -> None:
    server = start_server("--agent", "echo", "--server-api-key", "s3cret")
    peer = AgentClient(server.url)
    try:
        offer = await peer.offer()
        async with httpx.AsyncClient(base_url=server.url, timeout=20) as http:
            for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "s3cret"}):
                response = await http.post(
                    "/v1/realtime/calls",
                    content=offer,
                    headers={"Content-Type": "application/sdp", **headers},
                )
                assert response.status_code == 401, headers
                assert response.headers["www-authenticate"] == "Bearer"
            refused = await http.post("/offer", json={"sdp": offer, "type": "offer"})
            assert refused.status_code == 401
            response = await http.post(
                "/v1/realtime/calls",
                content=offer,
                headers={"Content-Type": "application/sdp", "Authorization": "Bearer s3cret"},
            )
            assert response.status_code == 201
            call_id = response.headers["location"].rsplit("/", 1)[-1]
            hangup = f"/v1/realtime/calls/{call_id}/hangup"
            assert (await http.post(hangup)).status_code == 401
            ok = await http.post(hangup, headers={"Authorization": "Bearer s3cret"})
            assert ok.status_code == 200
    finally:
        await peer.close()
