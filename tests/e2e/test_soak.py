"""Soak: 1000 echo sessions and 200 with the real engines, several at once, over
the Realtime WebSocket: nothing may pile up in the server (slots, tasks, threads, file
descriptors), and its memory may grow by 50 MB at most. WebRTC sessions get the same
check in test_leak.py."""

from __future__ import annotations

import asyncio
import base64
import functools
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import websockets

from clients import load_wav
from tests.support.server import PoolFull, ServerProcess, leaves_nothing_behind

pytestmark = pytest.mark.e2e

RSS_BOUND_MB = 50.0
QUESTION = {"type": "message", "role": "user",
            "content": [{"type": "input_text", "text": "Say yes."}]}  # fmt: skip


async def until_response_done(ws: Any) -> dict[str, Any]:
    while True:
        event = json.loads(await asyncio.wait_for(ws.recv(), 60))
        if event["type"] == "response.done":
            return dict(event["response"])


async def opened(ws: Any) -> None:
    """The session began (PoolFull: every slot is in use)."""
    first = json.loads(await ws.recv())
    if first["type"] == "error" and first["error"]["code"] == "session_limit_reached":
        raise PoolFull
    assert first["type"] == "session.created", first


async def echo_session(url: str, speech: str, *, turn: bool) -> None:
    """A short session that says a word (base64 PCM at 24 kHz); every tenth has the echo
    answer it as a turn."""
    async with websockets.connect(url, max_size=None) as ws:
        await opened(ws)
        await ws.send(json.dumps({"type": "input_audio_buffer.append", "audio": speech}))
        if turn:
            await ws.send(json.dumps({"type": "input_audio_buffer.commit"}))
            assert (await until_response_done(ws))["status"] == "completed"


async def agent_session(url: str) -> None:
    """A written answer from the real LLM: the engines' path, without minutes of audio."""
    async with websockets.connect(url, max_size=None) as ws:
        await opened(ws)
        update = {"output_modalities": ["text"], "max_output_tokens": 4}
        await ws.send(json.dumps({"type": "session.update", "session": update}))
        await ws.send(json.dumps({"type": "conversation.item.create", "item": QUESTION}))
        await ws.send(json.dumps({"type": "response.create"}))
        assert (await until_response_done(ws))["status"] == "completed"


async def soak(server: ServerProcess, sessions: int, run: Any, *, at_once: int) -> None:
    url = server.url.replace("http://", "ws://") + "/v1/realtime"
    await leaves_nothing_behind(
        server.url, functools.partial(run, url), sessions=sessions, at_once=at_once,
        rss_bound_mb=RSS_BOUND_MB,
    )  # fmt: skip


async def test_a_thousand_echo_sessions_leave_nothing_behind(
    echo_server: ServerProcess, speech: Callable[[str], Path]
) -> None:
    # Real speech: the voice detector rightly hears no turn in a tone.
    word = base64.b64encode(load_wav(str(speech("Yes.")), rate=24_000).tobytes()).decode()
    await soak(
        echo_server, 1000, lambda url, i: echo_session(url, word, turn=i % 10 == 0), at_once=4
    )


async def test_two_hundred_sessions_with_the_real_engines_leave_nothing_behind(
    agent_server: ServerProcess,
) -> None:
    await soak(agent_server, 200, lambda url, i: agent_session(url), at_once=2)
