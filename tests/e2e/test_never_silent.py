"""After the caller's last words the agent is heard answering them: the default agent
(Whisper, the embedded LLM, Kokoro) over real WebRTC, with a caller whose microphone
reacts to what it hears and to the server's events. It speaks again at each moment of a
reply's life, corrects itself, pauses inside a question and inside a phrase, and asks
twice in a row; each time the test's own Whisper must hear the answer to the last words
in the reply audio that follows them. On its own:
`.venv/bin/python -m pytest tests/e2e/test_never_silent.py`.

The moments are the caller's: the server hears speech begin some 150 ms after it does
(its voice detector's start), so "as the turn ends" lands while the turn is transcribed
or the LLM starts, and "in its last moments" within the last few hundred ms of the audio.
tests/session/test_never_silent.py pins each moment exactly, with engine doubles.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import astuple, dataclass
from typing import Any

import numpy as np
import pytest

from clients import AgentClient
from tests.support.server import ServerProcess
from tests.support.speech import kokoro_caller, transcribe

pytestmark = pytest.mark.e2e

FRANCE = "What is the capital of France?"
ITALY = "What is the capital of Italy?"
STORY = "Tell me a long story about a brave knight."
SUM = "What is two plus two?"
CORRECTION = "Sorry, I mean Italy."
ASKING = "I want to ask you something."
JAPAN = "What is the capital of Japan?"
SPAIN = "And what is the capital of Spain?"
# Apart, "How many kilometers are in?" and "10 miles." were answered "ten kilometers.".
STOPPED = "How many kilometres are in"
FINISHED = "ten miles?"
# Kokoro's voice says about 13 characters a second (75-88 ms each, measured); the caller
# begins this long before the reply's predicted end, for the server to hear it start
# within the reply's last moments.
MS_PER_CHAR = 75
LEAD_S = 0.3
TIMEOUT_S = 120

Moment = Callable[[AgentClient], Awaitable[None]]


async def as_the_turn_ends(client: AgentClient) -> None:
    await client.wait_for("input_audio_buffer.committed", timeout_s=TIMEOUT_S)


async def as_the_reply_begins(client: AgentClient) -> None:
    await client.wait_for("response.created", timeout_s=TIMEOUT_S)


async def before_its_first_audio(client: AgentClient) -> None:
    await client.wait_for("response.created", timeout_s=TIMEOUT_S)
    await asyncio.sleep(0.5)


async def first_voice(client: AgentClient) -> float:
    """When the reply began to be heard here."""
    await client.wait_for("response.created", timeout_s=TIMEOUT_S)
    since = client.event_time("response.created")
    deadline = time.monotonic() + TIMEOUT_S
    while (heard := client.recording.first_voice_after(since)) is None:
        if time.monotonic() > deadline:
            raise TimeoutError("the reply never became audible")
        await asyncio.sleep(0.02)
    return heard


async def while_it_plays(client: AgentClient) -> None:
    await asyncio.sleep(max(0.0, await first_voice(client) + 1.0 - time.monotonic()))


async def between_clauses(client: AgentClient) -> None:
    """In the first silence within a long reply (on a slow CPU, the gap while the next
    clause is made), or as it ends."""
    await first_voice(client)
    while not client.of_type("response.done"):
        last = client.recording.last_voice_at()
        if last is not None and time.monotonic() - last > 0.15:
            return
        await asyncio.sleep(0.02)


async def in_its_last_moments(client: AgentClient) -> None:
    """Just before the first sentence of the reply (all of a short one) is predicted to
    end, from its length."""
    await client.wait_for("response.output_audio_transcript.delta", timeout_s=TIMEOUT_S)
    started = client.event_time("response.output_audio_transcript.delta")
    sentence = client.of_type("response.output_audio_transcript.delta")[0]["delta"]
    ends = started + len(sentence) * MS_PER_CHAR / 1000
    await asyncio.sleep(max(0.0, ends - LEAD_S - time.monotonic()))


async def just_after_it_ends(client: AgentClient) -> None:
    await client.wait_for("output_audio_buffer.stopped", timeout_s=TIMEOUT_S)


async def after_a_pause(client: AgentClient) -> None:
    """1.5 s after the caller stopped: the turn ended, its reply not heard yet."""
    ended = await client.mic.said()
    await asyncio.sleep(max(0.0, ended + 1.5 - time.monotonic()))


@dataclass(frozen=True)
class Scene:
    first: str
    moment: Moment
    then: str
    answer: tuple[str, ...]  # words any of which the reply to the last words must say


SCENES = {
    "interrupted as its turn ends": Scene(FRANCE, as_the_turn_ends, ITALY, ("rome",)),
    "interrupted as the LLM begins": Scene(FRANCE, as_the_reply_begins, ITALY, ("rome",)),
    "interrupted before its first audio": Scene(FRANCE, before_its_first_audio, ITALY, ("rome",)),
    "interrupted between clauses": Scene(STORY, between_clauses, ITALY, ("rome",)),
    "interrupted while it plays": Scene(STORY, while_it_plays, ITALY, ("rome",)),
    "interrupted in its last moments": Scene(SUM, in_its_last_moments, ITALY, ("rome",)),
    "asked again just after it ends": Scene(SUM, just_after_it_ends, ITALY, ("rome",)),
    "a self-correction": Scene(FRANCE, as_the_reply_begins, CORRECTION, ("rome",)),
    "a 1.5 s pause inside a question": Scene(ASKING, after_a_pause, JAPAN, ("tokyo",)),
    "two questions back to back": Scene(FRANCE, after_a_pause, SPAIN, ("madrid",)),
    "a pause inside a phrase": Scene(
        STOPPED, as_the_reply_begins, FINISHED, ("16.09", "sixteen point zero nine")
    ),
}


@pytest.fixture(scope="module")
async def said() -> dict[str, np.ndarray]:
    texts = {text for scene in SCENES.values() for text in (scene.first, scene.then)}
    return await kokoro_caller(sorted(texts))


@pytest.mark.parametrize("scene", list(SCENES))
async def test_the_last_words_are_answered(
    agent_server: ServerProcess, said: dict[str, np.ndarray], whisper: object, scene: str
) -> None:
    first, moment, then, answer = astuple(SCENES[scene])
    client = AgentClient(agent_server.url)
    await client.connect()
    try:
        client.mic.say(said[first])
        await moment(client)
        client.mic.say(said[then])
        ended = await client.mic.said()
        await client.wait_until(lambda: client.answered_since(ended), "an answer", TIMEOUT_S)
        await client.wait_quiet(since=ended, quiet_s=0.5, timeout_s=TIMEOUT_S)
        reply = client.recording.audio(since=ended)
        heard = transcribe(whisper, reply, client.recording.rate)
    finally:
        await client.close()
    asked = [e["transcript"] for e in client.of_type(TRANSCRIBED)]
    done = [(e["response"]["status"], _said(e)) for e in client.of_type("response.done")]
    # The last words are answered, and the answer is heard: Whisper tiny.en mishears a
    # word of Kokoro's now and then ("Italy's capital is Rome." as "At least capital is
    # wrong." on an AVX2 CPU), so the caller must hear words of the reply, and the reply
    # must say the answer.
    written = done[-1][1].lower()
    assert any(re.search(rf"\b{word}\b", written) for word in answer), (heard, asked, done)
    shared = set(re.findall(r"[a-z']+", heard.lower())) & set(re.findall(r"[a-z']+", written))
    assert len(shared) >= 2, (heard, asked, done)
    # Every response created was done, the last of them heard to its end.
    assert len(client.of_type("response.created")) == len(done), done
    assert done[-1][0] == "completed", done


TRANSCRIBED = "conversation.item.input_audio_transcription.completed"


def _said(done: dict[str, Any]) -> str:
    parts = [part for item in done["response"]["output"] for part in item.get("content", [])]
    return " ".join(part.get("transcript", "") for part in parts)
