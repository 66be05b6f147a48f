"""A slot whose session will not stop is quarantined, then rebuilt: capacity heals itself.

The server runs in-process here so one task can be made deliberately stuck.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from pathlib import Path

import httpx
import pytest
import uvicorn

from app.agent.echo_responder import EchoResponder
from app.agent.responders import Piece, SpeechRequest
from app.config import PoolSettings, Settings
from app.main import create_app
from clients import AgentClient, load_wav
from tests.support.server import free_port

STUCK_FOR_S = 2.5


@contextlib.asynccontextmanager
async def serving(settings: Settings) -> AsyncIterator[tuple[object, str]]:
    app = create_app(settings)
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_config=None))
    task = asyncio.create_task(server.serve())
    url = f"http://127.0.0.1:{port}"
    try:
        async with httpx.AsyncClient() as http:
            for _ in range(200):
                with contextlib.suppress(httpx.HTTPError):
                    if (await http.get(f"{url}/healthz")).status_code == 200:
                        break
                await asyncio.sleep(0.05)
        yield app, url
    finally:
        server.should_exit = True
        await task


async def stubborn(self: EchoResponder, request: SpeechRequest) -> AsyncGenerator[Piece, None]:
    """Ignores cancellation for a while, like a call wedged inside an engine."""
    deadline = time.monotonic() + STUCK_FOR_S
    while time.monotonic() < deadline:
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.sleep(0.05)
    return
    yield


async def slot_state(http: httpx.AsyncClient, url: str) -> str:
    return str((await http.get(f"{url}/v1/pool")).json()["slots"][0]["state"])


async def wait_state(http: httpx.AsyncClient, url: str, state: str, timeout_s: float) -> None:
    for _ in range(int(timeout_s / 0.05)):
        if await slot_state(http, url) == state:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"slot never became {state}; it is {await slot_state(http, url)}")


async def test_a_stuck_drain_quarantines_the_slot_which_then_heals(
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    speech: Callable[[str], Path],
) -> None:
    monkeypatch.setattr(EchoResponder, "speak", stubborn)
    settings = Settings(
        agent="echo",
        pool=PoolSettings(max_sessions=1, drain_timeout_s=0.3, quarantine_s=1.0),
    )
    caplog.set_level(logging.INFO)
    async with serving(settings) as (_, url), httpx.AsyncClient() as http:
        client = AgentClient(url)
        await client.connect()
        client.mic.say(load_wav(str(speech("Please get stuck."))))
        await client.wait_for("input_audio_buffer.speech_stopped", timeout_s=20)
        await client.close()

        await wait_state(http, url, "quarantined", timeout_s=5)
        assert (await http.get(f"{url}/readyz")).status_code == 503
        assert "quarantined" in caplog.text and ":reply" in caplog.text, "names the stuck task"

        await wait_state(http, url, "idle", timeout_s=3)
        assert (await http.get(f"{url}/readyz")).status_code == 200
        again = AgentClient(url)
        try:
            await again.connect()
        finally:
            await again.close()
        await asyncio.sleep(STUCK_FOR_S)  # let the stubborn task run out before the loop moves on


async def test_offers_during_shutdown_get_503() -> None:
    async with serving(Settings(agent="echo")) as (app, url):
        app.state.calls.accepting = False  # type: ignore[attr-defined]
        client = AgentClient(url)
        async with httpx.AsyncClient() as http:
            response = await http.post(
                f"{url}/offer", json={"sdp": await client.offer(), "type": "offer"}
            )
        await client.close()
        assert response.status_code == 503
        assert response.json()["error"]["message"] == "server is shutting down"
