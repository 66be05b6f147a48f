"""Tools the server runs itself, end to end on the real engines: a client's MCP server
named over the official openai SDK's Realtime WebSocket, one that is not allowed, and
the operator's tools (mcp-server-time over stdio, from PyPI) on a phone call from
baresip, which brings no tools of its own."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import httpx
import numpy as np
import pytest
import websockets
from openai import AsyncOpenAI
from openai.resources.realtime.realtime import AsyncRealtimeConnection
from openai.types.realtime import RealtimeServerEvent
from pydantic import TypeAdapter

from app.audio.resample import Resampler
from tests.e2e.test_sip_phone import Sideband, _samples, dial, microphone, phones
from tests.support.baresip import Baresip, have_baresip
from tests.support.mcp_server import McpHttpServer
from tests.support.server import ServerProcess, free_udp_port, until_in_use
from tests.support.speech import transcribe, words

pytestmark = pytest.mark.e2e
__all__ = ["phones"]  # a fixture, used by name

SERVER_EVENT: TypeAdapter[RealtimeServerEvent] = TypeAdapter(RealtimeServerEvent)
SPOKEN = [
    "zero",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
    "thirteen",
    "fourteen",
    "fifteen",
    "sixteen",
    "seventeen",
    "eighteen",
    "nineteen",
    "twenty",
    "twenty-one",
    "twenty-two",
    "twenty-three",
]


@pytest.fixture(scope="module")
def mcp_server() -> Iterator[McpHttpServer]:
    server = McpHttpServer().start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def tools_server(
    start_module_server: Callable[..., ServerProcess], mcp_server: McpHttpServer
) -> ServerProcess:
    """The default agent, answering greedily, with the operator's tool for every call:
    the clock from PyPI, over stdio. Clients may name only MCP servers on 127.0.0.1 at
    /mcp."""
    clock = [sys.executable, "-m", "mcp_server_time", "--local-timezone", "UTC"]
    default = [
        {"type": "mcp", "server_label": "clock", "command": clock, "require_approval": "never",
         "allowed_tools": ["get_current_time"]}
    ]  # fmt: skip
    return start_module_server(
        "--max-sessions", "2", "--llm-temperature", "0", "--sip-port", str(free_udp_port()),
        "--tools-default", json.dumps(default),
        "--tools-mcp-allowed-urls", "http://127.0.0.1:*/mcp",
    )  # fmt: skip


async def events_until(
    conn: AsyncRealtimeConnection, kind: str, count: int = 1
) -> list[RealtimeServerEvent]:
    """Events, each parsed as the SDK's own type, up to the `count`th of `kind`."""
    seen: list[RealtimeServerEvent] = []
    while sum(event.type == kind for event in seen) < count:
        event = SERVER_EVENT.validate_json(await conn.recv_bytes())
        seen.append(event)
    return seen


async def ask_typed(conn: AsyncRealtimeConnection, question: str) -> None:
    await conn.conversation.item.create(
        item={"type": "message", "role": "user",
              "content": [{"type": "input_text", "text": question}]}
    )  # fmt: skip
    await conn.response.create()


async def test_a_client_names_an_mcp_server_and_the_agent_says_its_result(
    tools_server: ServerProcess, mcp_server: McpHttpServer
) -> None:
    sdk = AsyncOpenAI(base_url=f"{tools_server.url}/v1", api_key="sk-anything")
    async with sdk.realtime.connect(model="embedded") as conn:
        await events_until(conn, "session.created")
        orders = {
            "type": "mcp", "server_label": "orders", "server_url": mcp_server.url,
            "allowed_tools": ["order_status"], "require_approval": "never",
            "headers": {"X-Api-Key": "the-client-secret"},
        }  # fmt: skip
        await conn.session.update(
            session={"type": "realtime", "tools": [orders],  # type: ignore[list-item]
                     "audio": {"input": {"turn_detection": None}}}
        )  # fmt: skip
        seen = await events_until(conn, "session.updated")
        shown = [tool.model_dump() for tool in seen[-1].session.tools or []]  # type: ignore[union-attr]
        assert {"orders", "clock"} <= {t.get("server_label") for t in shown}, shown
        assert "the-client-secret" not in json.dumps(shown), "headers are never shown"
        while True:  # the orders server's tools, listed
            seen += await events_until(conn, "conversation.item.done")
            item = seen[-1].item  # type: ignore[union-attr]
            if item.type == "mcp_list_tools" and item.server_label == "orders":
                break
        assert [tool.name for tool in item.tools] == ["order_status"]
        assert "mcp_list_tools.completed" in [e.type for e in seen]

        await ask_typed(conn, "Where is my order 42?")
        seen = await events_until(conn, "response.done")
    kinds = [e.type for e in seen]
    assert "error" not in kinds, seen
    assert kinds.index("response.mcp_call.in_progress") < kinds.index(
        "response.mcp_call.completed"
    ) < kinds.index("response.output_audio_transcript.done")  # fmt: skip
    done = seen[-1].response  # type: ignore[union-attr]
    call, message = done.output[0], done.output[-1]
    assert (call.type, call.server_label, call.name) == ("mcp_call", "orders", "order_status")
    assert call.output == "Order 42 has shipped and arrives on Tuesday."
    said = message.content[0].transcript.lower()
    assert "tuesday" in said, said
    async with httpx.AsyncClient() as http:
        metrics = (await http.get(f"{tools_server.url}/metrics")).text
    assert 'voice_agent_tool_calls_total{server="orders"} 1.0' in metrics
    assert 'voice_agent_tool_failures_total{server="orders"} 0.0' in metrics


async def test_a_call_that_needs_approval_runs_once_the_client_approves(
    tools_server: ServerProcess, mcp_server: McpHttpServer
) -> None:
    sdk = AsyncOpenAI(base_url=f"{tools_server.url}/v1", api_key="sk-anything")
    async with sdk.realtime.connect(model="embedded") as conn:
        await events_until(conn, "session.created")
        orders = {
            "type": "mcp",
            "server_label": "orders",
            "server_url": mcp_server.url,
            "allowed_tools": ["order_status"],
        }  # approval: OpenAI's default, always
        await conn.session.update(
            session={"type": "realtime", "tools": [orders],  # type: ignore[list-item]
                     "output_modalities": ["text"], "audio": {"input": {"turn_detection": None}}}
        )  # fmt: skip
        await events_until(conn, "session.updated")
        await ask_typed(conn, "Where is my order 42?")
        asked = (await events_until(conn, "response.done"))[-1].response  # type: ignore[union-attr]
        (request,) = asked.output
        assert (request.type, request.name) == ("mcp_approval_request", "order_status")
        before = mcp_server.requests
        await conn.conversation.item.create(
            item={"type": "mcp_approval_response", "approval_request_id": request.id,
                  "approve": True}
        )  # fmt: skip
        seen = await events_until(conn, "response.done")
    assert mcp_server.requests > before, "run only once approved"
    call, message = seen[-1].response.output  # type: ignore[union-attr]
    assert (call.type, call.approval_request_id) == ("mcp_call", request.id)
    assert call.output == "Order 42 has shipped and arrives on Tuesday."
    assert "tuesday" in message.content[0].text.lower()


async def test_a_response_names_its_own_mcp_server(
    tools_server: ServerProcess, mcp_server: McpHttpServer
) -> None:
    sdk = AsyncOpenAI(base_url=f"{tools_server.url}/v1", api_key="sk-anything")
    async with sdk.realtime.connect(model="embedded") as conn:
        await events_until(conn, "session.created")
        await conn.session.update(
            session={"type": "realtime", "output_modalities": ["text"],
                     "audio": {"input": {"turn_detection": None}}}
        )  # fmt: skip
        await events_until(conn, "session.updated")
        await conn.conversation.item.create(
            item={"type": "message", "role": "user",
                  "content": [{"type": "input_text", "text": "Where is my order 42?"}]}
        )  # fmt: skip
        orders = {"type": "mcp", "server_label": "orders", "server_url": mcp_server.url,
                  "allowed_tools": ["order_status"], "require_approval": "never"}  # fmt: skip
        await conn.response.create(response={"tools": [orders]})  # type: ignore[list-item]
        seen = await events_until(conn, "response.done")
    kinds = [e.type for e in seen]
    assert "error" not in kinds and "mcp_list_tools.completed" in kinds, kinds
    call, message = seen[-1].response.output  # type: ignore[union-attr]
    assert (call.type, call.server_label) == ("mcp_call", "orders")
    assert call.output == "Order 42 has shipped and arrives on Tuesday."
    assert "tuesday" in message.content[0].text.lower()


async def test_a_server_not_allowed_is_refused_and_hears_nothing(
    tools_server: ServerProcess,
) -> None:
    other = McpHttpServer().start()  # a real server, reached only by a name not allowed
    try:
        sdk = AsyncOpenAI(base_url=f"{tools_server.url}/v1", api_key="sk-anything")
        async with sdk.realtime.connect(model="embedded") as conn:
            await events_until(conn, "session.created")
            named = f"http://localhost:{other.port}/mcp"
            await conn.session.update(
                session={"type": "realtime", "tools": [  # type: ignore[list-item]
                    {"type": "mcp", "server_label": "x", "server_url": named}]}
            )  # fmt: skip
            error = (await events_until(conn, "error"))[-1]
            assert error.error.param == "session.tools", error  # type: ignore[union-attr]
            assert "not one this server allows" in error.error.message  # type: ignore[union-attr]
            await conn.response.create(response={"tools": [  # type: ignore[list-item]
                {"type": "mcp", "server_label": "x", "server_url": named}]})  # fmt: skip
            error = (await events_until(conn, "error"))[-1]
            assert error.error.param == "response.tools", error  # type: ignore[union-attr]
    finally:
        other.stop()
    assert other.requests == 0


@pytest.mark.skipif(not have_baresip(), reason="baresip is not installed")
async def test_a_phone_caller_gets_the_operators_tools(
    tools_server: ServerProcess,
    speech: Callable[[str], Path],
    whisper: Any,
    phones: Callable[[Path], Any],
    tmp_path: Path,
) -> None:
    # Asked where it is day: the 0.5B model read the tool's "00:07:37" as "7.37 am" and
    # "01:27:33" as "12.27pm". Between them the three cities always have one at 9 to 20.
    city, zone = next(
        (city, zone)
        for city, zone in (
            ("Tokyo", "Asia/Tokyo"), ("London", "Europe/London"), ("New York", "America/New_York")
        )
        if 9 <= datetime.now(ZoneInfo(zone)).hour <= 20
    )  # fmt: skip
    mic = microphone(speech(f"What time is it in {city} right now?"), tmp_path / "mic.wav")
    phone: Baresip = await phones(mic)
    session_id = await dial(phone, tools_server)
    url = f"ws://127.0.0.1:{tools_server.port}/v1/realtime?call_id={session_id}"
    async with websockets.connect(url) as ws:
        sideband = Sideband(ws)
        (done,) = await sideband.until("response.done")
    await phone.command("hangup")
    await phone.wait_for("CALL_CLOSED")
    await until_in_use(tools_server.url, 0)
    output = done["response"]["output"]
    call = output[0]
    assert (call["type"], call["server_label"], call["name"]) == (
        "mcp_call", "clock", "get_current_time",
    ), output  # fmt: skip
    assert json.loads(call["arguments"])["timezone"] == zone
    told = json.loads(call["output"])["datetime"]  # 2026-12-06T13:20:52+09:00
    hour, minute = int(told[11:13]), told[14:16]
    reply = np.frombuffer(Resampler(48_000).pcm(_samples(phone.heard()), 8_000), np.int16)
    said = transcribe(whisper, reply)
    # The time as Whisper writes it (13:20, 1.20 pm, 1320), or the hour alone.
    digits = re.sub(r"\D", "", said)
    heard = any(f"{h}{minute}" in digits for h in (hour, hour % 12 or 12))
    hours = {str(hour), str(hour % 12 or 12), SPOKEN[hour], SPOKEN[hour % 12 or 12]}
    spelled = hours & set(words(said.replace(".", " ").replace(":", " ")))
    assert heard or spelled, f"Whisper hears the tool's answer ({told}): {said!r}"
