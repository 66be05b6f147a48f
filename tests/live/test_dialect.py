"""The Live dialect driving a session (engine doubles, no network): client events in as
JSON text, server events out, each checked against the openai SDK's own models
(openai.types.live)."""

from __future__ import annotations

import asyncio
import base64
import json
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest
from openai.types.live import ServerEvent
from pydantic import TypeAdapter

from app.config import LimitsSettings
from app.events.audio import AudioIn, AudioOut
from app.live.dialect import LiveDialect
from app.live.session_config import (
    Delegation,
    InitialItem,
    SessionConfig,
    StartProblem,
    audio_format,
    to_changes,
)
from app.tools.servers import ToolServers
from tests.session.fakes import FakeLLM, FakeTTS, make_session, noise, silence

SERVER_EVENT: TypeAdapter[ServerEvent] = TypeAdapter(ServerEvent)
LIMITS = LimitsSettings()


class Wire(list[dict[str, Any]]):
    max_message_bytes = 1024 * 1024

    def send_text(self, text: str, *, droppable: bool = False) -> None:
        self.append(json.loads(text))


class Client:
    """A Live dialect on a session with engine doubles, its audio over a WebSocket (pcm16
    at 16 kHz, so the test's audio goes in as it is)."""

    def __init__(
        self,
        initial: Sequence[InitialItem] = (),
        delegation: Delegation | None = None,
        limits: LimitsSettings | None = None,
        tools: ToolServers | None = None,
    ) -> None:
        self.wire = Wire()
        self.stopped = 0
        self.dialect = LiveDialect(
            self.wire,
            model="gpt-live-1",
            expires_at=time.time() + 60,
            audio=(AudioIn("audio/pcm", 16_000), AudioOut("audio/pcm", 16_000)),
            initial=initial,
            stop=self._stop,
            started_by="evt_start",
            delegation=delegation,
        )
        self.session, _, self.audio, self.engines = make_session(
            also=self.dialect.deliver, limits=limits, tools=tools
        )
        self.dialect.attach(self.session)

    def _stop(self) -> None:
        self.stopped += 1

    def send(self, event: dict[str, Any]) -> None:
        self.dialect.receive(json.dumps(event))

    def speak(self, pcm: bytes) -> None:
        self.send({"type": "session.input_audio.append", "audio": base64.b64encode(pcm).decode()})

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [event for event in self.wire if event["type"] == kind]

    async def wait_for(self, kind: str, count: int = 1, timeout_s: float = 6.0) -> None:
        for _ in range(int(timeout_s / 0.02)):
            if len(self.of(kind)) >= count:
                return
            await asyncio.sleep(0.02)
        raise AssertionError(f"fewer than {count} {kind}: {[e['type'] for e in self.wire]}")

    def assert_sdk_parses(self) -> None:
        for event in self.wire:
            SERVER_EVENT.validate_python(event)


async def test_a_spoken_turn_on_one_timeline() -> None:
    client = Client()
    client.dialect.opened()
    started = client.of("session.started")[0]
    assert started["client_event_id"] == "evt_start"
    assert started["session"]["audio"]["format"] == {"type": "audio/pcm", "rate": 16_000}
    client.speak(silence(300) + noise(800) + silence(700))
    await client.wait_for("session.usage.updated")
    (heard,) = client.of("session.input_transcript.delta")
    assert heard["delta"].startswith("question of")
    # Sent faster than it plays: the timeline follows the audio, and the utterance sits
    # inside it, where it was in the audio.
    assert 250 <= heard["start_ms"] <= 350 < heard["end_ms"] <= 1800
    said = client.of("session.output_transcript.delta")
    assert "".join(e["delta"] for e in said).split()[0] == "Sure,"
    assert all(e["start_ms"] >= heard["end_ms"] for e in said)
    assert client.of("session.usage.updated")[0]["usage"]["seconds"] > 0
    client.assert_sdk_parses()
    await client.session.close()


async def test_muted_audio_is_heard_as_silence() -> None:
    client = Client()
    client.send({"type": "session.input_audio.mute", "event_id": "m1"})
    assert client.of("session.input_audio.muted")[0]["client_event_id"] == "m1"
    client.speak(noise(800) + silence(700))
    await asyncio.sleep(0.3)
    assert client.engines.stt.heard == [], "nothing was heard while muted"  # type: ignore[attr-defined]
    client.send({"type": "session.input_audio.unmute"})
    client.speak(noise(800) + silence(700))
    await client.wait_for("session.input_transcript.delta")
    assert client.session.usage.audio_in_samples == 16 * 3000, "muted audio still counts"
    client.assert_sdk_parses()
    await client.session.close()


async def test_context_reaches_the_llm_and_commentary_is_said_after_the_reply() -> None:
    client = Client([InitialItem(role="user", content=[{"text": "My name is Ada."}])])  # type: ignore[list-item]
    llm, tts = client.engines.llm, client.engines.tts
    assert isinstance(llm, FakeLLM) and isinstance(tts, FakeTTS)
    llm.hold_after = 2
    client.send({"type": "session.instructions.append", "content": "Speak French.",
                 "delegation_id": None, "event_id": "i1"})  # fmt: skip
    client.send({"type": "session.thinking.append", "content": "The user is in Paris.",
                 "delegation_id": None})  # fmt: skip
    client.speak(noise(800) + silence(700))
    for _ in range(300):  # the reply to the turn is on its way
        if llm.prompts:
            break
        await asyncio.sleep(0.02)
    client.send({"type": "session.commentary.append", "content": "Your order shipped.",
                 "delegation_id": None, "event_id": "c1"})  # fmt: skip
    assert client.of("session.commentary.appended")[0]["client_event_id"] == "c1"
    llm.release.set()
    await client.wait_for("session.usage.updated", count=2)
    texts = [m["content"] for m in llm.prompts[0]]
    assert "My name is Ada." in texts and "Speak French." in texts
    assert any("The user is in Paris." in t and "not to be read out" in t for t in texts if t)
    said = [text for text, _, _ in tts.spoken]
    assert said[-1] == "Your order shipped.", "said as it is, once the reply was over"
    assert len(llm.prompts) == 1, "no LLM was asked to word it"
    told = [e["delta"] for e in client.of("session.output_transcript.delta")]
    assert told[-1] == "Your order shipped."
    assert client.of("session.instructions.appended")[0]["client_event_id"] == "i1"
    client.assert_sdk_parses()
    await client.session.close()


async def test_a_fixture_replaces_the_reply_and_mutes_the_input() -> None:
    client = Client()
    llm = client.engines.llm
    assert isinstance(llm, FakeLLM)
    llm.hold_after = 3
    client.speak(noise(800) + silence(700))
    for _ in range(300):
        if client.session.reply is not None:
            break
        await asyncio.sleep(0.02)
    clip = (np.sin(np.arange(12_000) * 2 * np.pi * 440 / 24_000) * 6000).astype(np.int16)
    client.send({"type": "session.output_audio.fixture.play", "event_id": "f1",
                 "audio": base64.b64encode(clip.tobytes()).decode()})  # fmt: skip
    assert client.of("session.output_audio.fixture.playing")[0]["client_event_id"] == "f1"
    assert client.session.muted, "the agent hears nothing while it plays"
    client.send({"type": "session.output_audio.fixture.play", "audio": "AAAA"})
    assert client.of("error")[-1]["error"]["message"] == "a fixture is already playing"
    heard_before = len(client.engines.stt.heard)  # type: ignore[attr-defined]
    client.speak(noise(300))  # dropped: not a turn
    await client.wait_for("session.output_audio.fixture.played")
    assert client.of("session.output_audio.fixture.played")[0]["client_event_id"] == "f1"
    assert not client.session.muted
    assert len(client.engines.stt.heard) == heard_before  # type: ignore[attr-defined]
    # The agent's reply was cut for it: its LLM stream was closed early.
    assert llm.closed_early == 1
    client.assert_sdk_parses()
    await client.session.close()


async def test_refusals_name_the_event_and_the_session_goes_on() -> None:
    client = Client()
    client.dialect.receive("{nope")
    client.send({"type": "session.start", "session": {"model": "m"}, "event_id": "s2"})
    client.send({"type": "response.item.create", "item": {}})
    client.send({"type": "session.commentary.append", "content": "", "delegation_id": None})
    client.send({"type": "session.input_audio.append", "audio": "%%%"})
    client.send({"type": "session.output_audio.fixture.play", "audio": "AAA"})
    client.send({"type": "transport.dtmf.send", "event": "5"})  # not a SIP call
    client.send({"type": "transport.dtmf.send", "event": "X"})
    codes = [(e["error"]["code"], e["error"].get("param")) for e in client.of("error")]
    assert codes == [
        ("invalid_json", None),
        ("session_already_started", None),
        ("invalid_request", "type"),
        ("invalid_value", "content"),
        ("invalid_audio", "audio"),
        ("invalid_audio", "audio"),
        ("invalid_request", None),
        ("invalid_value", "event"),
    ]
    assert client.of("error")[1]["client_event_id"] == "s2"
    client.send({"type": "session.close"})
    assert client.stopped == 1
    client.dialect.call_ended("close_requested", "closed")
    assert client.of("session.closed")[0]["reason"] == "close_requested"
    client.assert_sdk_parses()
    await client.session.close()


def test_start_config_voices_and_formats() -> None:
    voices = ("jf_alpha", "jm_kumo")

    def voiced(voice: object) -> SessionConfig:
        return SessionConfig.model_validate({"model": "m", "audio": {"output": {"voice": voice}}})

    assert to_changes(voiced("marin"), voices, LIMITS).voice is None, (
        "OpenAI's voices: the server's"
    )
    assert to_changes(voiced("jm_kumo"), voices, LIMITS).voice == "jm_kumo"
    config = voiced({"id": "x"})
    with pytest.raises(StartProblem, match="unknown voice 'x'") as refused:
        to_changes(config, voices, LIMITS)
    assert refused.value.param == "session.audio.output.voice"
    config = SessionConfig.model_validate({"model": "m", "instructions": "  "})
    assert to_changes(config, voices, LIMITS).instructions is None, (
        "blank keeps the server's prompt"
    )
    config = SessionConfig.model_validate({"model": "m", "delegation": {"type": "responses"}})
    with pytest.raises(StartProblem, match="responses delegation"):
        to_changes(config, voices, LIMITS)
    formats = {
        None: ("audio/pcm", 24_000),
        ("audio/pcm", 16_000): ("audio/pcm", 16_000),
        ("audio/pcmu", 8_000): ("audio/pcmu", 8_000),
        ("audio/pcma", None): ("audio/pcma", 8_000),
    }
    for asked, expected in formats.items():
        audio = {} if asked is None else {"format": {"type": asked[0], "rate": asked[1]}}
        config = SessionConfig.model_validate({"model": "m", "audio": audio})
        assert audio_format(config) == expected
    with pytest.raises(StartProblem):
        wide = {"format": {"type": "audio/pcmu", "rate": 16_000}}
        audio_format(SessionConfig.model_validate({"model": "m", "audio": wide}))


def test_audio_in_and_out_round_trip_through_g711() -> None:
    tone = (np.sin(np.arange(24_000) * 2 * np.pi * 440 / 24_000) * 8000).astype(np.int16)
    out = AudioOut("audio/pcmu", 8_000)
    mulaw = out.encode(tone.tobytes())
    assert len(mulaw) == pytest.approx(8_000, abs=80), "a second at 8 kHz, a byte a sample"
    back = AudioIn("audio/pcmu", 8_000)
    pcm16k = np.frombuffer(back.pcm16k(base64.b64encode(mulaw).decode()), dtype=np.int16)
    assert len(pcm16k) == pytest.approx(16_000, abs=200)
    assert abs(np.abs(pcm16k[2000:14000]).mean() - np.abs(tone).mean()) < 600
    assert back.seconds(base64.b64encode(mulaw).decode()) == pytest.approx(1.0, abs=0.02)


async def test_a_fixture_is_the_clients_own_audio_of_at_most_30_s() -> None:
    """A clip is the audio in the event, never something the server would open or fetch
    for the client, and no longer than Live allows."""
    client = Client()
    client.wire.max_message_bytes = 4 * 1024 * 1024  # a WebSocket's, which carries 31 s
    long_clip = bytes(2 * 24_000 * 31)
    for event in (
        {"audio": base64.b64encode(long_clip).decode()},
        {"url": "http://169.254.169.254/latest/meta-data"},
        {"path": "/etc/passwd"},
        {"audio": "/etc/passwd"},
        {"audio": {"url": "file:///etc/passwd"}},
    ):
        client.send({"type": "session.output_audio.fixture.play", **event})
    codes = [(e["error"]["code"], e["error"].get("param")) for e in client.of("error")]
    assert codes == [("invalid_audio", "audio"), ("invalid_value", "audio"),
                     ("invalid_value", "audio"), ("invalid_audio", "audio"),
                     ("invalid_value", "audio")], codes  # fmt: skip
    assert not client.of("session.output_audio.fixture.playing")
    assert not client.session.muted, "nothing was played"
    await client.session.close()
