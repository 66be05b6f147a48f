"""A hostile Realtime WebSocket client against the echo server: what it sends cannot make
the server hold, or send back, more than a bounded amount."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
from collections.abc import Callable
from typing import Any

import psutil
import pytest
import websockets

from app.ws.transport import OUTBOX_BYTES
from tests.support.server import ServerProcess, until_in_use

pytestmark = pytest.mark.e2e


def ws_url(server: ServerProcess) -> str:
    return server.url.replace("http://", "ws://") + "/v1/realtime?model=x"


async def test_a_huge_unknown_type_gets_a_short_error(echo_server: ServerProcess) -> None:
    async with websockets.connect(ws_url(echo_server), max_size=None) as ws:
        assert json.loads(await ws.recv())["type"] == "session.created"
        await ws.send(json.dumps({"type": "x" * 1_000_000, "event_id": "e" * 100_000}))
        raw = await ws.recv()
    error = json.loads(raw)["error"]
    assert error["code"] == "unknown_event"
    assert len(raw) < 1024, "the client's megabyte is not echoed back"
    assert error["message"].endswith("characters)"), "it says how long the message was"
    assert error["event_id"].startswith("eee") and len(error["event_id"]) < 200


async def test_a_client_that_never_reads_is_cut_off_not_buffered(
    start_server: Callable[..., ServerProcess],
) -> None:
    # Items far larger than the default limits allow, so each is echoed, not refused.
    server = start_server("--agent", "echo", "--max-sessions", "1", "--limits-item-chars",
                          "4000000", "--limits-history-chars", "100000000")  # fmt: skip
    rss_before = psutil.Process(server.proc.pid).memory_info().rss
    text = "word " * 600_000  # 3 MB of text, which item.added and item.done each echo
    item = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}
    async with websockets.connect(ws_url(server), max_size=None) as ws:
        # Never read: 20 items would queue 120 MB of echoes for this client.
        for _ in range(20):
            try:
                await ws.send(json.dumps({"type": "conversation.item.create", "item": item}))
            except websockets.ConnectionClosed:
                break
        await asyncio.sleep(1)
        received = 0
        with pytest.raises(websockets.ConnectionClosed):
            while True:
                received += len(await asyncio.wait_for(ws.recv(), timeout=30))
    # The server ended the call once the outbox was over its bound, far short of 120 MB.
    assert received < 40 * 1024 * 1024 + OUTBOX_BYTES, received
    await until_in_use(server.url, 0)
    grown = psutil.Process(server.proc.pid).memory_info().rss - rss_before
    assert grown < 150 * 1024 * 1024, f"RSS grew {grown / 2**20:.0f} MB"


async def test_json_nested_too_deeply_gets_an_error_and_the_session_goes_on(
    echo_server: ServerProcess,
) -> None:
    async with websockets.connect(ws_url(echo_server), max_size=None) as ws:
        assert json.loads(await ws.recv())["type"] == "session.created"
        await ws.send("[" * 5000 + "]" * 5000)
        await ws.send('{"type": "session.update", "session": ' + "[" * 3000 + "]" * 3000 + "}")
        first, second = json.loads(await ws.recv()), json.loads(await ws.recv())
        assert first["error"]["code"] == "invalid_json"
        assert second["error"]["code"] == "invalid_json"
        await ws.send(json.dumps({"type": "session.update", "session": {"instructions": "Hi"}}))
        assert json.loads(await ws.recv())["type"] == "session.updated"


async def test_instructions_and_tools_have_bounds(echo_server: ServerProcess) -> None:
    def tool(name: str, description: str = "") -> dict[str, object]:
        return {"type": "function", "name": name, "description": description,
                "parameters": {"type": "object", "properties": {}}}  # fmt: skip

    updates = [
        ({"instructions": "i" * 65_537}, "session.instructions", "65537 characters"),
        ({"tools": [tool(f"t{i}") for i in range(129)]}, "session.tools", "129 tools"),
        ({"tools": [tool("big", "d" * 20_000)]}, "session.tools", "'big'"),
    ]
    async with websockets.connect(ws_url(echo_server), max_size=None) as ws:
        assert json.loads(await ws.recv())["type"] == "session.created"
        for session, param, says in updates:
            await ws.send(json.dumps({"type": "session.update", "session": session}))
            error = json.loads(await ws.recv())["error"]
            assert (error["code"], error["param"]) == ("invalid_value", param), error
            assert says in error["message"], error["message"]
        # At the bounds, they are taken.
        await ws.send(json.dumps({"type": "session.update",
                                  "session": {"instructions": "i" * 65_536}}))  # fmt: skip
        assert json.loads(await ws.recv())["type"] == "session.updated"


async def test_message_sizes_are_settings(start_server: Callable[..., ServerProcess]) -> None:
    server = start_server("--agent", "echo", "--limits-ws-message-bytes", str(1024 * 1024))
    async with websockets.connect(ws_url(server), max_size=None) as ws:
        assert json.loads(await ws.recv())["type"] == "session.created"
        await ws.send(json.dumps({"type": "session.update", "session": {"instructions": "i"}}
                                 | {"pad": "p" * (1024 * 1024)}))  # fmt: skip
        error = json.loads(await ws.recv())["error"]
        assert error["code"] == "invalid_message" and "1024 KiB" in error["message"]
        await ws.send(json.dumps({"type": "session.update", "session": {"instructions": "i"}}))
        assert json.loads(await ws.recv())["type"] == "session.updated"


async def test_streaming_silence_or_junk_does_not_keep_a_slot(
    start_server: Callable[..., ServerProcess],
) -> None:
    server = start_server("--agent", "echo", "--pool-idle-timeout-s", "2")
    silence = base64.b64encode(bytes(4800)).decode()  # 100 ms at 24 kHz
    heard: list[dict[str, Any]] = []

    async def listen(ws: Any) -> None:
        with contextlib.suppress(websockets.ConnectionClosed):
            while True:
                heard.append(json.loads(await ws.recv()))

    async with websockets.connect(ws_url(server), max_size=None) as ws:
        listener = asyncio.create_task(listen(ws))
        with contextlib.suppress(websockets.ConnectionClosed):
            for _ in range(100):  # 10 s of silence, sent in real time, and junk
                await ws.send(json.dumps({"type": "input_audio_buffer.append", "audio": silence}))
                await ws.send(json.dumps({"type": "noop"}))
                await asyncio.sleep(0.1)
        await listener
    # Ended by the idle timeout, as a session where nobody speaks is.
    codes = {e["error"]["code"] for e in heard if e["type"] == "error"}
    assert codes == {"unknown_event", "idle_timeout"}, codes
    assert heard[-1]["error"]["code"] == "idle_timeout"
    await until_in_use(server.url, 0)
