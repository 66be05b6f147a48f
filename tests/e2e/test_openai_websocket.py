"""The Realtime WebSocket with the official openai SDK: the same sessions as WebRTC."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
import websockets
from openai import AsyncOpenAI
from openai.resources.realtime.realtime import AsyncRealtimeConnection
from openai.types.realtime import RealtimeServerEvent
from pydantic import TypeAdapter

from app.audio import g711
from app.audio.level import rms_db
from clients import AgentClient, load_wav
from tests.support.realtime import user_text
from tests.support.server import ServerProcess
from tests.support.speech import QUESTION, word_error_rate

pytestmark = pytest.mark.e2e

SERVER_EVENT: TypeAdapter[RealtimeServerEvent] = TypeAdapter(RealtimeServerEvent)
CHUNK = 2400  # 100 ms at 24 kHz


async def events_until(conn: AsyncRealtimeConnection, kind: str) -> list[RealtimeServerEvent]:
    """Read events, each validated by the SDK's models, up to the first of `kind`."""
    seen = []
    while True:
        raw = await conn.recv_bytes()
        event = SERVER_EVENT.validate_json(raw)  # strict, where the SDK itself is lenient
        seen.append(event)
        if event.type == "error":
            raise AssertionError(f"server error: {raw!r}")
        if event.type == kind:
            return seen


def reply_audio(seen: list[Any]) -> np.ndarray:
    chunks = [base64.b64decode(e.delta) for e in seen if e.type == "response.output_audio.delta"]
    return np.frombuffer(b"".join(chunks), dtype=np.int16)


async def test_sdk_websocket_spoken_turn_and_text_turn(
    agent_server: ServerProcess, speech: Callable[[str], Path]
) -> None:
    sdk = AsyncOpenAI(base_url=f"{agent_server.url}/v1", api_key="sk-anything")
    async with sdk.realtime.connect(model="embedded") as conn:
        await events_until(conn, "session.created")
        await conn.session.update(
            session={"type": "realtime", "instructions": "Answer in one short sentence.",
                     "audio": {"input": {"turn_detection": {"type": "server_vad"}}}}
        )  # fmt: skip
        updated = (await events_until(conn, "session.updated"))[-1]
        assert updated.session.instructions == "Answer in one short sentence."  # type: ignore[union-attr]

        pcm = load_wav(str(speech(QUESTION)), rate=24_000)
        for offset in range(0, len(pcm), CHUNK):
            chunk = pcm[offset : offset + CHUNK].tobytes()
            await conn.input_audio_buffer.append(audio=base64.b64encode(chunk).decode())
        await conn.input_audio_buffer.commit()
        seen = await events_until(conn, "response.done")
        kinds = [e.type for e in seen]
        assert "input_audio_buffer.committed" in kinds
        heard = [
            e for e in seen if e.type == "conversation.item.input_audio_transcription.completed"
        ]
        # If this fails, say which it was: a turn split early (two commits) or audio lost
        # (one commit, less audio kept than was sent).
        why = (kinds.count("input_audio_buffer.committed"), [h.transcript for h in heard])
        assert heard and word_error_rate(QUESTION, heard[0].transcript) <= 0.25, why
        assert seen[-1].response.status == "completed"  # type: ignore[union-attr]
        assert rms_db(reply_audio(seen)) > -50, "the reply came as audio deltas"
        assert "response.output_audio.done" in kinds

        # The user's turn, retrieved: its transcript and the audio the server kept.
        user_item = [e for e in seen if e.type == "input_audio_buffer.committed"][0].item_id  # type: ignore[union-attr]
        await conn.conversation.item.retrieve(item_id=user_item)
        retrieved = (await events_until(conn, "conversation.item.retrieved"))[-1]
        part = retrieved.item.content[0]  # type: ignore[union-attr]
        assert part.transcript == heard[0].transcript and part.audio
        kept_s = len(base64.b64decode(part.audio)) / 2 / 24_000
        assert 1.5 < kept_s <= len(pcm) / 24_000, "the utterance, without the lead-in silence"

        # Text in, speech out, on the same connection.
        await conn.conversation.item.create(item=user_text("Say hello."))
        await conn.response.create()
        seen = await events_until(conn, "response.done")
        assert seen[-1].response.status == "completed"  # type: ignore[union-attr]
        assert rms_db(reply_audio(seen)) > -50

        # Text in, text out: a written reply, no audio, within the token limit asked for.
        await conn.session.update(
            session={"type": "realtime", "output_modalities": ["text"], "max_output_tokens": 8}
        )
        await events_until(conn, "session.updated")
        await conn.conversation.item.create(item=user_text("Count from one to twenty."))
        await conn.response.create()
        seen = await events_until(conn, "response.done")
        written = "".join(e.delta for e in seen if e.type == "response.output_text.delta")  # type: ignore[union-attr]
        done = [e for e in seen if e.type == "response.output_text.done"][0]
        assert written.strip() and done.text == written.strip()  # type: ignore[union-attr]
        assert len(written.split()) <= 8, "max_output_tokens reached the LLM"
        assert not [e for e in seen if e.type.startswith("response.output_audio")]
    await sdk.close()


async def test_websocket_bad_input_and_a_full_pool(
    start_server: Callable[..., ServerProcess], speech: Callable[[str], Path]
) -> None:
    server = start_server("--agent", "echo", "--max-sessions", "1")
    url = server.url.replace("http://", "ws://") + "/v1/realtime?model=x"
    async with websockets.connect(url) as ws:
        assert json.loads(await ws.recv())["type"] == "session.created"
        await ws.send("{oops")
        await ws.send(json.dumps({"type": "no.such.event"}))
        await ws.send(json.dumps({"type": "input_audio_buffer.append", "audio": "AAA"}))
        await ws.send(json.dumps(
            {"type": "session.update",
             "session": {"audio": {"input": {"format": {"type": "audio/pcm", "rate": 16000}}}}}
        ))  # fmt: skip
        codes = [json.loads(await ws.recv())["error"]["code"] for _ in range(4)]
        assert codes == ["invalid_json", "unknown_event", "invalid_audio", "invalid_value"]

        # The one slot is taken: a second client is told so, then closed with 1008.
        async with websockets.connect(url) as refused:
            error = json.loads(await refused.recv())
            assert error["type"] == "error"
            assert error["error"]["type"] == "session_limit_reached"
            with pytest.raises(websockets.ConnectionClosed) as closed:
                await refused.recv()
            assert closed.value.rcvd is not None and closed.value.rcvd.code == 1008

        # Both transports share one pool: a WebRTC call is refused too.
        async with httpx.AsyncClient(timeout=10) as http:
            busy = await http.post(
                f"{server.url}/v1/realtime/calls",
                content=await AgentClient(server.url).offer(),
                headers={"Content-Type": "application/sdp"},
            )
        assert busy.status_code == 503 and busy.headers["retry-after"]
        assert busy.json()["error"]["type"] == "session_limit_reached"

        # The first session survived all that: echo answers speech sent as audio
        # (real speech: the voice detector rightly ignores a tone).
        pcm = load_wav(str(speech("Hello there.")), rate=24_000)
        audio = base64.b64encode(pcm.tobytes()).decode()
        await ws.send(json.dumps({"type": "input_audio_buffer.append", "audio": audio}))
        await ws.send(json.dumps({"type": "input_audio_buffer.commit"}))
        kinds = []
        while "response.done" not in kinds:
            kinds.append(json.loads(await ws.recv())["type"])
        assert "response.output_audio.delta" in kinds


async def test_browser_style_handshakes_subprotocols_keys_and_origins(
    start_server: Callable[..., ServerProcess],
) -> None:
    """What a browser SDK sends: subprotocols for the protocol and the key (a browser
    cannot set headers), and an Origin that only allowed pages get through."""
    # A slot for each socket opened below: a closed one may still be draining.
    server = start_server(
        "--agent", "echo", "--max-sessions", "4", "--server-api-key", "s3cret",
        "--server-allowed-origins", "https://app.example",
    )  # fmt: skip
    url = server.url.replace("http://", "ws://") + "/v1/realtime?model=x"
    sdk = ["realtime", "openai-insecure-api-key.s3cret", "openai-agents-sdk.0.20.0"]
    for origin in (None, "https://app.example", server.url):
        async with websockets.connect(url, subprotocols=sdk, origin=origin) as ws:
            assert ws.subprotocol == "realtime", "a browser needs one of its offers chosen"
            assert json.loads(await ws.recv())["type"] == "session.created"
    # The key in a header works as before, and no subprotocol is chosen if none is offered.
    headers = {"Authorization": "Bearer s3cret"}
    async with websockets.connect(url, additional_headers=headers) as ws:
        assert ws.subprotocol is None
        assert json.loads(await ws.recv())["type"] == "session.created"
    refusals = [
        {"subprotocols": ["realtime", "openai-insecure-api-key.wrong"]},
        {"subprotocols": ["realtime"]},
        {"subprotocols": sdk, "origin": "https://evil.example"},
    ]
    for refusal in refusals:
        with pytest.raises(websockets.InvalidStatus) as refused:
            async with websockets.connect(url, **refusal):
                pass
        assert refused.value.response.status_code == 403, refusal


async def test_sdk_websocket_with_g711_both_ways(
    agent_server: ServerProcess, speech: Callable[[str], Path]
) -> None:
    """What a telephony gateway passes through: mu-law at 8 kHz, in and out."""
    sdk = AsyncOpenAI(base_url=f"{agent_server.url}/v1", api_key="sk-anything")
    async with sdk.realtime.connect(model="embedded") as conn:
        await events_until(conn, "session.created")
        await conn.session.update(
            session={"type": "realtime", "audio": {
                "input": {"format": {"type": "audio/pcmu"}, "turn_detection": None},
                "output": {"format": {"type": "audio/pcmu"}}}}
        )  # fmt: skip
        updated = (await events_until(conn, "session.updated"))[-1]
        assert updated.session.audio.output.format.type == "audio/pcmu"  # type: ignore[union-attr]
        mulaw = g711.encode(load_wav(str(speech(QUESTION)), rate=8_000).tobytes(), "ulaw")
        for offset in range(0, len(mulaw), 800):  # 100 ms at 8 kHz
            chunk = base64.b64encode(mulaw[offset : offset + 800]).decode()
            await conn.input_audio_buffer.append(audio=chunk)
        await conn.input_audio_buffer.commit()
        seen = await events_until(conn, "response.done")
        heard = [
            e for e in seen if e.type == "conversation.item.input_audio_transcription.completed"
        ]
        assert heard and word_error_rate(QUESTION, heard[0].transcript) <= 0.25
        reply = b"".join(
            base64.b64decode(e.delta)
            for e in seen
            if e.type == "response.output_audio.delta"  # type: ignore[union-attr]
        )
        pcm = np.frombuffer(g711.decode(reply, "ulaw"), dtype=np.int16)
        assert len(pcm) > 8_000 * 0.5 and rms_db(pcm) > -50, "the reply, as mu-law at 8 kHz"
    await sdk.close()


WEATHER_TOOL = {
    "type": "function",
    "name": "get_weather",
    "description": "The weather in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                   "required": ["city"]},
}  # fmt: skip


async def test_sdk_websocket_tool_round_trip(steady_agent_server: ServerProcess) -> None:
    """A tool the model is made to call (tool_choice), run by the client, whose result the
    spoken answer then uses."""
    sdk = AsyncOpenAI(base_url=f"{steady_agent_server.url}/v1", api_key="sk-anything")
    async with sdk.realtime.connect(model="embedded") as conn:
        await events_until(conn, "session.created")
        await conn.session.update(
            session={"type": "realtime", "tools": [WEATHER_TOOL],
                     "tool_choice": {"type": "function", "name": "get_weather"}}
        )  # fmt: skip
        updated = (await events_until(conn, "session.updated"))[-1]
        assert updated.session.tools[0].name == "get_weather"  # type: ignore[union-attr]
        await conn.conversation.item.create(item=user_text("What is the weather in Paris?"))
        await conn.response.create()
        seen = await events_until(conn, "response.done")
        done = seen[-1].response  # type: ignore[union-attr]
        assert done.status == "completed"
        (call,) = done.output
        assert call.type == "function_call" and call.name == "get_weather"  # type: ignore[union-attr]
        arguments = json.loads(call.arguments)  # type: ignore[union-attr]
        assert isinstance(arguments["city"], str)
        streamed = "".join(
            e.delta
            for e in seen
            if e.type == "response.function_call_arguments.delta"  # type: ignore[union-attr]
        )
        assert streamed == call.arguments  # type: ignore[union-attr]
        assert not reply_audio(seen).size, "a call, not speech"

        await conn.conversation.item.create(item={
            "type": "function_call_output", "call_id": call.call_id,  # type: ignore[union-attr]
            "output": json.dumps({"weather": "sunny", "celsius": 21})})  # fmt: skip
        await conn.response.create()
        seen = await events_until(conn, "response.done")
        assert seen[-1].response.status == "completed"  # type: ignore[union-attr]
        said = [e for e in seen if e.type == "response.output_audio_transcript.done"][0]
        assert rms_db(reply_audio(seen)) > -50, "the answer is spoken"
        assert "sunny" in said.transcript.lower() or "21" in said.transcript, said.transcript  # type: ignore[union-attr]
    await sdk.close()
