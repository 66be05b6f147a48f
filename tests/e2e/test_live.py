"""OpenAI's Live API with the official openai SDK (`client.live`): over a WebSocket and
over WebRTC, a sideband attached, hangup, and bad input. Every server event is
validated by the SDK's own models (strictly: the SDK itself parses leniently).

Most clients here use the SDK as it comes, with a base URL ending in /v1 (as Realtime
needs), which puts Live at /v1/live/sessions; the delegation tests' use a bare base URL,
which puts it at /live/sessions."""

from __future__ import annotations

import asyncio
import base64
import io
import json
import wave
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
import websockets
from openai import AsyncOpenAI
from openai.resources.live.live import AsyncLiveConnection
from openai.types.live import ConnectServerEvent, ServerEvent
from openai.types.responses import ResponseStreamEvent
from pydantic import TypeAdapter

from app.audio.level import rms_db
from app.live.delegation import ACKNOWLEDGE
from clients import AgentClient, load_wav
from tests.support.server import ServerProcess
from tests.support.speech import QUESTION, transcribe, word_error_rate

pytestmark = pytest.mark.e2e

SERVER_EVENT: TypeAdapter[ServerEvent] = TypeAdapter(ServerEvent)
SIDEBAND_EVENT: TypeAdapter[ConnectServerEvent] = TypeAdapter(ConnectServerEvent)
RESPONSES_EVENT: TypeAdapter[ResponseStreamEvent] = TypeAdapter(ResponseStreamEvent)
RATE = 24_000
CHUNK = 2400  # 100 ms
MUTED = "Tell me a long story about a cat."
RECORDED = "This call may be recorded for training purposes."
ASK_TO_CHECK = "Please check the deployment status of the staging environment."
DELEGATING = (
    "You are a voice assistant. You cannot look anything up yourself: when the user asks "
    "you to check or look up something, delegate it."
)


async def events_until(conn: AsyncLiveConnection, kind: str) -> list[Any]:
    """Read events, each validated by the SDK's models, up to the first of `kind`."""
    seen = []
    while True:
        raw = await asyncio.wait_for(conn.recv_bytes(), timeout=120)
        event = SERVER_EVENT.validate_json(raw)
        seen.append(event)
        if event.type == "error":
            raise AssertionError(f"server error: {raw!r}")
        if event.type == kind:
            return seen


async def say(conn: AsyncLiveConnection, pcm: np.ndarray) -> None:
    """Speech, then the second of silence that ends a turn (Live has no commit)."""
    audio = np.concatenate([pcm, np.zeros(RATE * 3 // 2, dtype=np.int16)])
    for offset in range(0, len(audio), CHUNK):
        chunk = audio[offset : offset + CHUNK].tobytes()
        await conn.session.input_audio.append(audio=base64.b64encode(chunk).decode())


def spoken(seen: list[Any]) -> tuple[np.ndarray, str]:
    """The reply's audio, and its words as the output transcript told them."""
    chunks = [base64.b64decode(e.delta) for e in seen if e.type == "session.output_audio.delta"]
    words = "".join(e.delta for e in seen if e.type == "session.output_transcript.delta")
    return np.frombuffer(b"".join(chunks), dtype=np.int16), words


async def test_live_websocket_turns_mute_update_and_close(
    agent_server: ServerProcess, speech: Callable[[str], Path], whisper: object
) -> None:
    sdk = AsyncOpenAI(base_url=f"{agent_server.url}/v1", api_key="sk-anything")
    async with sdk.live.connect() as conn:
        await conn.session.start(
            session={"model": "gpt-live-1", "instructions": "Answer in one short sentence.",
                     "audio": {"format": {"type": "audio/pcm", "rate": RATE},
                               "output": {"voice": "marin"}}},
            event_id="evt_start",
        )  # fmt: skip
        started = (await events_until(conn, "session.started"))[-1]
        assert started.client_event_id == "evt_start"
        assert started.session.instructions == "Answer in one short sentence."
        assert started.session.audio.format.rate == RATE

        await conn.session.update(
            session={"delegation": {"type": "client", "acknowledgement_delay_ms": 250}}
        )
        updated = (await events_until(conn, "session.updated"))[-1]
        assert updated.session.delegation.acknowledgement_delay_ms == 250

        # Muted, the agent hears silence: the story request is never a turn.
        await conn.session.input_audio.mute(event_id="evt_mute")
        assert (await events_until(conn, "session.input_audio.muted"))[-1].client_event_id == (
            "evt_mute"
        )
        await say(conn, load_wav(str(speech(MUTED)), rate=RATE))
        await conn.session.input_audio.unmute()
        await events_until(conn, "session.input_audio.unmuted")

        # A spoken turn: its transcript, then the reply as audio and words.
        await say(conn, load_wav(str(speech(QUESTION)), rate=RATE))
        seen = await events_until(conn, "session.usage.updated")
        heard = [e for e in seen if e.type == "session.input_transcript.delta"]
        assert len(heard) == 1, [e.delta for e in heard]
        assert word_error_rate(QUESTION, heard[0].delta) <= 0.25, heard[0].delta
        assert heard[0].start_ms < heard[0].end_ms
        audio, words = spoken(seen)
        assert rms_db(audio) > -50 and words.strip()
        said = transcribe(whisper, audio, RATE)
        assert word_error_rate(words, said) <= 0.5, (words, said)

        # Commentary is spoken: the Live way to have the agent say something.
        await conn.session.commentary.append(
            content="The kitchen lights are now on.", delegation_id=None, event_id="evt_c"
        )
        seen = await events_until(conn, "session.usage.updated")
        acked = [e for e in seen if e.type == "session.commentary.appended"]
        assert acked and acked[0].client_event_id == "evt_c"
        audio, words = spoken(seen)
        assert rms_db(audio) > -50 and words.strip()

        # A recorded clip, played as it is; the agent hears nothing while it plays.
        clip = load_wav(str(speech(RECORDED)), rate=RATE)
        await conn.session.output_audio.fixture.play(
            audio=base64.b64encode(clip.tobytes()).decode(), event_id="evt_clip"
        )
        seen = await events_until(conn, "session.output_audio.fixture.played")
        assert [e.client_event_id for e in seen if e.type.startswith("session.output_audio.fix")
                ] == ["evt_clip", "evt_clip"]  # fmt: skip
        audio, _ = spoken(seen)
        assert word_error_rate(RECORDED, transcribe(whisper, audio, RATE)) <= 0.25

        await conn.session.close()
        closed = (await events_until(conn, "session.closed"))[-1]
        assert closed.reason == "close_requested" and closed.usage.seconds > 1
    async with httpx.AsyncClient(timeout=5) as http:
        pool = (await http.get(f"{agent_server.url}/v1/pool")).json()
    assert pool["in_use"] == 0, "session.close freed the slot"
    await sdk.close()


async def test_live_webrtc_with_a_sideband_then_hangup(
    agent_server: ServerProcess, speech: Callable[[str], Path]
) -> None:
    # One client for both dialects, as the SDK comes: Live and Realtime under /v1.
    sdk = AsyncOpenAI(base_url=f"{agent_server.url}/v1", api_key="sk-anything")
    peer = AgentClient(agent_server.url)
    try:
        created = await sdk.live.create(
            session={"model": "gpt-live-1", "instructions": "Answer in one short sentence."},
            transport={"type": "webrtc", "sdp": await peer.offer()},
        )
        session_id = created.session.id
        assert created.transport.sdp.startswith("v=0")
        await peer.accept({"session_id": session_id, "sdp": created.transport.sdp})
        started = await peer.wait_for("session.started", timeout_s=20)
        assert started["session"]["id"] == session_id

        async with sdk.live.sideband.connect(session_id=session_id) as sideband:
            first = SIDEBAND_EVENT.validate_json(await sideband.recv_bytes())
            assert first.type == "session.updated" and first.session.id == session_id
            # The sideband's command is acknowledged (to everyone: it changes the session).
            await sideband.session.instructions.append(
                content="Be cheerful.", delegation_id=None, event_id="evt_side"
            )
            acked = SIDEBAND_EVENT.validate_json(await sideband.recv_bytes())
            assert acked.type == "session.instructions.appended"
            assert acked.client_event_id == "evt_side"

            # A spoken turn on the media track: the peer hears the answer, and the
            # sideband reads the same transcripts.
            asked_at = asyncio.get_running_loop().time()
            peer.mic.say(load_wav(str(speech(QUESTION))))
            heard = await peer.wait_for("session.input_transcript.delta", timeout_s=60)
            assert word_error_rate(QUESTION, heard["delta"]) <= 0.25
            await peer.wait_for("session.usage.updated", timeout_s=120)
            said = "".join(e["delta"] for e in peer.of_type("session.output_transcript.delta"))
            assert said.strip()
            assert rms_db(peer.recording.audio(since=asked_at)) > -50, "the answer was heard"
            sideband_saw = []
            while (event := SIDEBAND_EVENT.validate_json(await sideband.recv_bytes())).type != (
                "session.usage.updated"
            ):
                sideband_saw.append(event)
            sideband_heard = [
                e.delta for e in sideband_saw if e.type == "session.input_transcript.delta"
            ]
            assert sideband_heard == [heard["delta"]]
            # The audio both ways, reflected to the sideband: the caller's, and the agent's
            # placed on the timeline.
            caller = b"".join(base64.b64decode(e.audio) for e in sideband_saw
                              if e.type == "session.input_audio.append")  # fmt: skip
            assert rms_db(np.frombuffer(caller, dtype=np.int16)) > -50
            out = [e for e in sideband_saw if e.type == "session.output_audio.delta"]
            assert out and all(e.start_ms < e.end_ms for e in out)
            assert all(a.end_ms <= b.start_ms + 20 for a, b in zip(out, out[1:], strict=False))
            agent = b"".join(base64.b64decode(e.delta) for e in out)
            assert rms_db(np.frombuffer(agent, dtype=np.int16)) > -50
        for _, event in peer.events:
            SERVER_EVENT.validate_python(event)
        assert peer.of_type("session.instructions.appended")[0]["client_event_id"] == "evt_side"
        # A Realtime controller may join the Live session too, in its own words.
        async with sdk.realtime.connect(call_id=session_id) as controller:
            created = await controller.recv()
            assert created.type == "session.created" and created.session.id == session_id  # type: ignore[union-attr]

        await sdk.live.sessions.hangup(session_id)
        async with httpx.AsyncClient(timeout=5) as http:
            pool = (await http.get(f"{agent_server.url}/v1/pool")).json()
        assert pool["in_use"] == 0, "hanging up freed the slot"
        with pytest.raises(Exception, match="404"):
            await sdk.live.sessions.hangup(session_id)
    finally:
        await peer.close()
        await sdk.close()


async def test_live_bad_input_and_a_full_pool(start_server: Callable[..., ServerProcess]) -> None:
    server = start_server("--agent", "echo", "--max-sessions", "1")
    url = server.url.replace("http://", "ws://") + "/live/sessions"

    async def answer(ws: Any, event: Any) -> dict[str, Any]:
        await ws.send(event if isinstance(event, str) else json.dumps(event))
        reply = json.loads(await ws.recv())
        SERVER_EVENT.validate_python(reply)
        return reply

    def code(reply: dict[str, Any]) -> tuple[str, str | None]:
        assert reply["type"] == "error", reply
        return reply["error"]["code"], reply["error"].get("param")

    async with websockets.connect(url) as ws:
        # Before session.start: each mistake is named, and the socket waits for a start.
        assert code(await answer(ws, "{oops")) == ("invalid_json", None)
        append = {"type": "session.input_audio.append", "audio": "AAAA"}
        assert code(await answer(ws, append))[0] == "session_not_started"
        assert code(await answer(ws, {"type": "session.start", "session": {}})) == (
            "invalid_value", "session.model")  # fmt: skip
        bad_rate = {"model": "m", "audio": {"format": {"type": "audio/pcm", "rate": 44100}}}
        reply = await answer(ws, {"type": "session.start", "session": bad_rate, "event_id": "e1"})
        assert code(reply) == ("invalid_value", "session.audio.format.rate")
        assert reply["error"]["client_event_id"] == "e1"
        start = {"type": "session.start", "session": {"model": "m"}}
        assert (await answer(ws, start))["type"] == "session.started"

        # Started: more mistakes, each answered, and the session goes on.
        assert code(await answer(ws, start))[0] == "session_already_started"
        assert code(await answer(ws, {"type": "no.such.event"})) == ("unknown_event", "type")
        assert code(await answer(ws, {"type": "response.create"}))[0] == "invalid_request"
        assert code(await answer(ws, {"type": "session.input_audio.append", "audio": "A"})) == (
            "invalid_audio", "audio")  # fmt: skip
        switch = {"type": "session.update", "session": {"delegation": {"type": "responses"}}}
        assert code(await answer(ws, switch)) == ("immutable_field_update",
                                                  "session.delegation.type")  # fmt: skip
        reply = await answer(ws, {"type": "session.input_audio.mute"})
        assert reply["type"] == "session.input_audio.muted", "the session went on"

        # The one slot is taken: a second client's start is told so, then closed (1008).
        async with websockets.connect(url) as refused:
            reply = await answer(refused, start)
            assert reply["type"] == "error" and reply["error"]["code"] == "session_limit_reached"
            with pytest.raises(websockets.ConnectionClosed) as closed:
                await refused.recv()
            assert closed.value.rcvd is not None and closed.value.rcvd.code == 1008

    async with httpx.AsyncClient(base_url=server.url, timeout=10) as http:
        for _ in range(100):  # the closed session's slot is freed as its call ends
            if (await http.get("/v1/pool")).json()["in_use"] == 0:
                break
            await asyncio.sleep(0.1)
        response = await http.post("/live/sessions", json={"session": {"model": "m"}})
        assert response.status_code == 400 and "transport" in response.json()["error"]["message"]
        response = await http.post(
            "/live/sessions",
            json={"session": {"model": "m"}, "transport": {"type": "webrtc", "sdp": "hello"}},
        )
        assert response.status_code == 400, response.text
        response = await http.post("/live/sessions/sess_x/refer", json={"target_uri": "tel:1"})
        # No transfer targets listed: every transfer is refused before the call is looked up.
        assert response.status_code == 403, response.text
        assert "--sip-transfer-targets" in response.json()["error"]["message"]
        for prefix in ("", "/v1"):
            response = await http.post(f"{prefix}/live/sessions/sess_x/fork", json={})
            assert response.status_code == 501 and "fork" in response.json()["error"]["message"]
    async with websockets.connect(url + "/sess_unknown/attach") as stranger:
        reply = json.loads(await stranger.recv())
        assert reply["error"]["code"] == "session_not_found"


async def start_delegating(conn: AsyncLiveConnection, delegation: dict[str, Any]) -> None:
    await conn.session.start(
        session={"model": "gpt-live-1", "instructions": DELEGATING, "delegation": delegation}
    )
    await events_until(conn, "session.started")


async def test_live_client_delegation_round_trip(
    steady_agent_server: ServerProcess, speech: Callable[[str], Path], whisper: object
) -> None:
    """The agent hands a look-up to the client, says it is on it, and speaks the answer
    the client sends back for that delegation."""
    sdk = AsyncOpenAI(base_url=steady_agent_server.url, api_key="sk-anything")
    async with sdk.live.connect() as conn:
        await start_delegating(conn, {"type": "client"})
        await say(conn, load_wav(str(speech(ASK_TO_CHECK)), rate=RATE))
        seen = await events_until(conn, "session.delegation.created")
        heard = [e.delta for e in seen if e.type == "session.input_transcript.delta"]
        delegation = seen[-1].delegation
        assert delegation.target == "client"
        assert delegation.model_extra["task"] == heard[0], "the task: what the user asked"
        said = await events_until(conn, "session.usage.updated")  # the acknowledgement
        answer = "Staging is healthy: all twelve services are up."
        await conn.session.commentary.append(content=answer, delegation_id=delegation.id)
        seen = said + await events_until(conn, "session.usage.updated")
        while not [e for e in seen if e.type == "session.output_transcript.delta"
                   and answer in e.delta]:  # fmt: skip
            seen += await events_until(conn, "session.usage.updated")
        told = [e.delta for e in seen if e.type == "session.output_transcript.delta"]
        assert told[0] == ACKNOWLEDGE and told[-1] == answer
        audio, _ = spoken(seen)
        assert word_error_rate(ACKNOWLEDGE + " " + answer, transcribe(whisper, audio, RATE)) <= 0.3
    await sdk.close()


async def test_live_responses_delegation_answered_while_the_voice_speaks(
    steady_agent_server: ServerProcess, speech: Callable[[str], Path]
) -> None:
    """The server runs the backend (a second call to its LLM, streamed as response.event)
    while the voice says it is working on it; then the voice says the backend's answer."""
    sdk = AsyncOpenAI(base_url=steady_agent_server.url, api_key="sk-anything")
    backend = {"model": "backend", "instructions": "You check deployments. All are healthy."}
    async with sdk.live.connect() as conn:
        await start_delegating(conn, {"type": "responses", "responses": backend})
        await say(conn, load_wav(str(speech(ASK_TO_CHECK)), rate=RATE))
        seen = await events_until(conn, "session.delegation.created")
        delegation = seen[-1].delegation
        assert delegation.target == "responses" and delegation.response_id
        backend_done: str | None = None
        told: list[str] = []
        while backend_done is None or backend_done not in told:
            event = await events_until_one(conn)
            if event.type == "response.event":
                assert event.delegation_id == delegation.id
                nested = RESPONSES_EVENT.validate_python(event.event)
                if nested.type == "response.output_text.done":
                    backend_done = nested.text
            elif event.type == "session.output_transcript.delta":
                told.append(event.delta)
        assert told[0] == ACKNOWLEDGE, "the voice said it was on it first"
        assert backend_done and told[-1] == backend_done
    await sdk.close()


async def events_until_one(conn: AsyncLiveConnection) -> Any:
    raw = await asyncio.wait_for(conn.recv_bytes(), timeout=120)
    event = SERVER_EVENT.validate_json(raw)
    assert event.type != "error", raw
    return event


async def test_live_recording_kept_for_its_retention_only(
    start_server: Callable[..., ServerProcess],
    speech: Callable[[str], Path],
    whisper: object,
    tmp_path: Path,
) -> None:
    """A session that asks (store: true) on a server that keeps recordings is recorded,
    both sides, and downloadable with the SDK until its retention runs out."""
    folder = tmp_path / "recordings"
    server = start_server(
        "--agent", "echo", "--recordings-retention-s", "4", "--recordings-dir", str(folder)
    )
    sdk = AsyncOpenAI(base_url=f"{server.url}/v1", api_key="sk-anything")
    bare = AsyncOpenAI(base_url=server.url, api_key="sk-anything")
    async with sdk.live.connect() as conn:
        await conn.session.start(session={"model": "gpt-live-1", "store": True})
        started = (await events_until(conn, "session.started"))[-1]
        assert started.session.store is True
        session_id = started.session.id
        await say(conn, load_wav(str(speech(QUESTION)), rate=RATE))
        await events_until(conn, "session.usage.updated")  # the echo played it back
        await conn.session.close()
        await events_until(conn, "session.closed")
    for _ in range(50):  # kept as the call ends
        if list(folder.glob("*.wav")):
            break
        await asyncio.sleep(0.1)
    wav = (await sdk.live.sessions.download_recording(session_id)).read()
    assert (await bare.live.sessions.download_recording(session_id)).read() == wav
    with wave.open(io.BytesIO(wav)) as reader:
        assert (reader.getnchannels(), reader.getframerate()) == (2, 16_000)
        frames = np.frombuffer(reader.readframes(reader.getnframes()), dtype=np.int16)
    caller, agent = frames[0::2].copy(), frames[1::2].copy()
    assert word_error_rate(QUESTION, transcribe(whisper, caller, 16_000)) <= 0.25
    assert word_error_rate(QUESTION, transcribe(whisper, agent, 16_000)) <= 0.25, "the echo"
    loudest = int(np.argmax(np.abs(agent) > 3000))
    assert loudest > int(np.argmax(np.abs(caller) > 3000)), "the agent after the caller"

    # Without store, nothing is kept; past the retention, nothing is left.
    async with sdk.live.connect() as conn:
        await conn.session.start(session={"model": "gpt-live-1"})
        unstored = (await events_until(conn, "session.started"))[-1]
        assert unstored.session.store is False
    await asyncio.sleep(4.5)
    for session in (session_id, unstored.session.id):
        with pytest.raises(Exception, match="404"):
            await sdk.live.sessions.download_recording(session)
    assert not list(folder.glob("*.wav"))
    await sdk.close()
    await bare.close()


async def test_live_takes_the_servers_key_and_client_secrets(
    start_server: Callable[..., ServerProcess],
) -> None:
    """The same keys as Realtime: a client secret opens a Live session, which starts with
    the secret's session config; it cannot attach a sideband; a wrong key opens nothing."""
    server = start_server("--agent", "echo", "--server-api-key", "s3cret")
    admin = AsyncOpenAI(base_url=f"{server.url}/v1", api_key="s3cret")
    minted = await admin.realtime.client_secrets.create(
        session={"type": "realtime", "instructions": "Speak like a pirate."}
    )
    browser = AsyncOpenAI(base_url=f"{server.url}/v1", api_key=minted.value)
    async with browser.live.connect() as conn:
        await conn.session.start(session={"model": "gpt-live-1"})
        started = (await events_until(conn, "session.started"))[-1]
        assert started.session.instructions == "Speak like a pirate."
        with pytest.raises(websockets.InvalidStatus, match="403"):
            async with browser.live.sideband.connect(session_id=started.session.id) as side:
                await side.recv()
    wrong = AsyncOpenAI(base_url=server.url, api_key="wrong", max_retries=0)
    with pytest.raises(websockets.InvalidStatus, match="403"):
        async with wrong.live.connect() as conn:
            await conn.recv()
    await admin.close()
    await browser.close()
