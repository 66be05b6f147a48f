"""Four conversations at once on the real engines: nothing crosses between them."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest

from app.audio.level import rms_db
from clients import AgentClient, load_wav
from tests.support.server import ServerProcess
from tests.support.speech import transcribe, word_error_rate, words

pytestmark = pytest.mark.e2e

# Words Whisper tiny.en hears reliably in espeak-ng speech ("elephants" came out "airlifts").
KEYWORDS = ["volcanoes", "bicycles", "chocolate", "dinosaurs"]


async def converse(url: str, wav: Path) -> AgentClient:
    client = AgentClient(url)
    await client.connect(timeout_s=60)
    client.mic.say(load_wav(str(wav)))
    await client.wait_for("response.done", timeout_s=240)
    assert client.mic.speech_ended_at is not None
    await client.wait_quiet(since=client.mic.speech_ended_at, quiet_s=1.5, timeout_s=120)
    return client


async def test_four_sessions_hear_only_themselves(
    start_server: Callable[..., ServerProcess], speech: Callable[[str], Path], whisper
) -> None:  # type: ignore[no-untyped-def]
    server = start_server("--max-sessions", "4", "--llm-max-tokens", "24")
    wavs = [speech(f"Please tell me about {keyword}.") for keyword in KEYWORDS]
    clients = await asyncio.gather(*(converse(server.url, wav) for wav in wavs))
    try:
        replies = []
        for keyword, client in zip(KEYWORDS, clients, strict=True):
            heard = client.of_type("conversation.item.input_audio_transcription.completed")
            assert len(heard) == 1
            said = words(heard[0]["transcript"])
            assert keyword.rstrip("s") in " ".join(said), (keyword, said)
            assert not any(
                other.rstrip("s") in " ".join(said) for other in KEYWORDS if other != keyword
            )
            done = client.of_type("response.done")[0]["response"]
            assert done["status"] == "completed"
            replies.append(client.of_type("response.output_audio_transcript.done")[0]["transcript"])
        verified = 0
        for index, client in enumerate(clients):
            assert client.mic.speech_ended_at is not None
            audio = client.recording.audio(since=client.mic.speech_ended_at)
            assert rms_db(audio) > -50, "every peer hears a reply"
            heard_reply = transcribe(whisper, audio)
            if len(words(heard_reply)) < 3:
                # Four conversations overload two cores (capacity is one): some
                # reply audio arrives too choppy for Whisper tiny.en to make out.
                continue
            errors = [word_error_rate(reply, heard_reply) for reply in replies]
            others = errors[:index] + errors[index + 1 :]
            # What this peer heard is its own reply, not one meant for another peer.
            assert errors[index] < min(others), (index, heard_reply, replies)
            verified += 1
        assert verified >= 2, "too few replies were intelligible to check their routing"
    finally:
        await asyncio.gather(*(client.close() for client in clients))
