"""Slot lifecycle against real servers and real aiortc peers: claims, timeouts, endings."""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from clients import AgentClient, load_wav
from tests.support.server import ServerProcess, until_in_use


async def pool_of(url: str) -> dict:
    async with httpx.AsyncClient() as http:
        return (await http.get(f"{url}/v1/pool")).json()


async def test_an_offer_storm_gets_exactly_as_many_sessions_as_slots(
    start_server: Callable[..., ServerProcess],
) -> None:
    server = start_server("--agent", "echo", "--max-sessions", "4")
    clients = [AgentClient(server.url) for _ in range(50)]
    offers = [await client.offer() for client in clients]
    async with httpx.AsyncClient(timeout=30) as http:
        responses = await asyncio.gather(
            *(http.post(f"{server.url}/offer", json={"sdp": o, "type": "offer"}) for o in offers)
        )
    try:
        codes = [r.status_code for r in responses]
        assert codes.count(200) == 4 and codes.count(503) == 46, codes
        winners = []
        for client, response in zip(clients, responses, strict=True):
            if response.status_code == 503:
                assert response.headers["retry-after"]
                assert response.json()["error"]["type"] == "session_limit_reached"
            else:
                await client.accept(response.json())
                winners.append(client)
        await asyncio.gather(*(c.wait_for("session.created", timeout_s=20) for c in winners))
        pool = await pool_of(server.url)
        assert pool["in_use"] == pool["size"] == 4
        assert {slot["state"] for slot in pool["slots"]} == {"active"}
    finally:
        await asyncio.gather(*(c.close() for c in clients))
    await until_in_use(server.url, 0)


async def test_a_peer_that_never_connects_is_freed_by_the_watchdog(
    start_server: Callable[..., ServerProcess],
) -> None:
    server = start_server("--agent", "echo", "--max-sessions", "1", "--pool-connect-timeout-s", "1")
    client = AgentClient(server.url)
    async with httpx.AsyncClient() as http:
        offer = {"sdp": await client.offer(), "type": "offer"}
        assert (await http.post(f"{server.url}/offer", json=offer)).status_code == 200
    assert (await pool_of(server.url))["slots"][0]["state"] == "connecting"
    await client.close()  # the answer was never applied: no ICE, no DTLS
    await until_in_use(server.url, 0, timeout_s=5)
    assert "connect_timeout" in server.log()


@pytest.mark.parametrize(
    ("flags", "reason"),
    [
        (["--pool-media-timeout-s", "1.5"], "media_timeout"),
        (["--pool-idle-timeout-s", "1.5"], "idle_timeout"),
        (["--pool-max-session-s", "1.5"], "session_expired"),
    ],
)
async def test_sessions_end_on_their_clocks_with_a_final_event(
    start_server: Callable[..., ServerProcess], flags: list[str], reason: str
) -> None:
    server = start_server("--agent", "echo", "--max-sessions", "1", *flags)
    client = AgentClient(server.url)
    await client.connect()
    try:
        if reason == "media_timeout":
            client.mic.stop()  # stop sending RTP, but never close: a vanished peer
        final = await client.wait_for("error", timeout_s=10)
        assert final["error"]["code"] == reason
    finally:
        await client.close()
    await until_in_use(server.url, 0, timeout_s=5)


async def test_sigterm_ends_calls_with_a_final_event_and_exits_promptly(
    start_server: Callable[..., ServerProcess], speech: Callable[[str], Path]
) -> None:
    server = start_server("--agent", "echo", "--max-sessions", "2")
    client = AgentClient(server.url)
    await client.connect()
    client.mic.say(load_wav(str(speech("Hello there, this is a long sentence to echo."))))
    await client.wait_for("input_audio_buffer.speech_started", timeout_s=10)
    started = time.monotonic()
    server.proc.send_signal(signal.SIGTERM)
    try:
        final = await client.wait_for("error", timeout_s=10)
        assert final["error"]["code"] == "shutdown"
    finally:
        await client.close()
    returncode = await asyncio.to_thread(server.proc.wait, 15)
    assert time.monotonic() - started < 10
    # uvicorn re-raises the signal once it has shut down cleanly.
    assert returncode in (0, -signal.SIGTERM), server.log()
    assert "Application shutdown complete" in server.log()
