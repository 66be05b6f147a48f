"""What a caller hears back is right: ten questions spoken by Kokoro (not espeak-ng) to
the default agent (Qwen2.5-Coder-1.5B) over WebRTC, each in a call of its own; the test's
own Whisper hears the reply's audio, which must hold the answer for at least 8 of the 10.
Asked who it is, it names itself, not a maker its model remembers from training; asked
for a figure, it says the one worked out for it."""

from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np
import pytest

from clients import AgentClient
from tests.support.server import DEFAULT_LLM, ServerProcess
from tests.support.speech import kokoro_caller, transcribe

pytestmark = pytest.mark.e2e

# (question, words any of which the reply must say)
QUESTIONS = [
    ("What is the capital of France?", ("paris",)),
    ("How many days are in a week?", ("seven", "7")),
    ("What is two plus two?", ("four", "4")),
    ("What color is the sky on a clear day?", ("blue",)),
    ("How many minutes are in an hour?", ("sixty", "60")),
    ("What do bees make?", ("honey",)),
    ("If today is Monday, what day is tomorrow?", ("tuesday",)),
    ("What is the capital of Japan?", ("tokyo",)),
    ("How many legs does a spider have?", ("eight", "8")),
    ("What is frozen water called?", ("ice",)),
]


WHO = "Who are you?"
# Said without app/agent/reckoning.py's note, by Qwen2.5-Coder-0.5B: "Three days have 21 hours."
FIGURE = "How many hours are in three days?"
# Typed, since spoken its commas end the turn: Qwen2.5-Coder-0.5B, under the default
# instructions, wrote it three paragraphs and a cut-off sentence, ~40 s of audio.
RAMBLING = (
    "Okay so my friend says that cats sleep like most of the day, is that true, and why "
    "would they do that, and do dogs do the same thing?"
)


@pytest.fixture(scope="module")
def default_server(start_module_server: Callable[..., ServerProcess]) -> ServerProcess:
    """The agent as `make run` starts it: other tests run the quicker 0.5B."""
    return start_module_server("--llm-embedded", DEFAULT_LLM, "--max-sessions", "2")


@pytest.fixture(scope="module")
async def spoken() -> dict[str, np.ndarray]:
    """Each question as Kokoro says it, 48 kHz int16 as a microphone sends it."""
    return await kokoro_caller([question for question, _ in QUESTIONS] + [WHO, FIGURE])


async def ask(url: str, audio: np.ndarray, whisper: object) -> tuple[str, str, str]:
    """A call of its own: what the agent heard, what the caller heard back, and the
    reply's own transcript."""
    client = AgentClient(url)
    await client.connect()
    try:
        client.mic.say(audio)
        await client.wait_for("response.done", timeout_s=90)
        await client.wait_quiet(client.event_time("response.created"), quiet_s=1.0)
        reply = np.concatenate(client.recording.frames)
        said = transcribe(whisper, reply, client.recording.rate)
    finally:
        await client.close()
    transcript = client.of_type("conversation.item.input_audio_transcription.completed")
    written = client.of_type("response.output_audio_transcript.done")
    return (
        transcript[0]["transcript"] if transcript else "",
        said,
        written[0]["transcript"] if written else "",
    )


async def test_spoken_questions_get_right_answers(
    default_server: ServerProcess, spoken: dict[str, np.ndarray], whisper: object
) -> None:
    heard: list[tuple[str, str, str]] = []
    for question, answers in QUESTIONS:
        asked, said, _ = await ask(default_server.url, spoken[question], whisper)
        if not any(re.search(rf"\b{word}\b", said.lower()) for word in answers):
            heard.append((question, asked, said))
    assert len(heard) <= 2, "wrong or unheard answers (question, heard as, reply):\n" + "\n".join(
        map(repr, heard)
    )


async def test_asked_who_it_is_it_names_itself_and_its_model(
    default_server: ServerProcess, spoken: dict[str, np.ndarray], whisper: object
) -> None:
    """Qwen2.5-Coder-0.5B under the old instructions said "I am an AI language model
    created by OpenAI"; the default instructions tell a model who it is
    (app/vocab/persona.py)."""
    asked, said, _ = await ask(default_server.url, spoken[WHO], whisper)
    heard = said.lower()
    assert re.search(r"\b(vera|assistant)\b", heard), (asked, said)
    assert re.search(r"\bcoder\b|\bmodel\b|point five|2\.5|0\.5", heard), (asked, said)
    assert not re.search(r"openai|chatgpt|\bgpt\b", heard), (asked, said)


async def test_a_figure_asked_for_is_worked_out_not_guessed(
    default_server: ServerProcess, spoken: dict[str, np.ndarray], whisper: object
) -> None:
    asked, said, written = await ask(default_server.url, spoken[FIGURE], whisper)
    for text in (written, said):
        assert re.search(r"\b(72|seventy[- ]two)\b", text.lower()), (asked, written, said)


async def typed(url: str, text: str, whisper: object) -> tuple[str, str]:
    """`text` typed into a call: the reply as written, and as a Whisper hears it."""
    client = AgentClient(url)
    await client.connect()
    try:
        client.send({
            "type": "conversation.item.create",
            "item": {"type": "message", "role": "user",
                     "content": [{"type": "input_text", "text": text}]},
        })  # fmt: skip
        client.send({"type": "response.create"})
        await client.wait_for("response.done", timeout_s=90)
        await client.wait_quiet(client.event_time("response.created"), quiet_s=1.0)
        said = transcribe(whisper, np.concatenate(client.recording.frames), client.recording.rate)
    finally:
        await client.close()
    return client.of_type("response.output_audio_transcript.done")[0]["transcript"], said


async def test_asked_if_it_is_a_person_it_says_it_is_not(
    default_server: ServerProcess, whisper: object
) -> None:
    """Both bundled Qwen models answer "Yes, I am a real person." whatever their
    instructions say; the reply rules say what it is instead (app/agent/no_pretending.py)."""
    written, said = await typed(default_server.url, "Are you a real person?", whisper)
    heard = said.lower()
    assert re.search(r"\bnot a person\b|\bassistant\b|\bcomputer\b", heard), (written, said)
    assert not re.search(r"\bi am a (real )?(person|human)|\bi'm a (real )?(person|human)", heard)


async def test_asked_what_it_can_do_it_says_so(
    agent_server: ServerProcess, whisper: object
) -> None:
    """Told it can only talk and to say it can't when asked to act, Qwen2.5-Coder-0.5B
    answered "I can't." to this every time; the reply rules say what it can instead. Asked
    of the 0.5B, which still needs them (the 1.5B has instructions of its own)."""
    written, said = await typed(agent_server.url, "What can you do?", whisper)
    assert re.search(r"\b(talk|answer|questions|help)\b", said.lower()), (written, said)
    assert not re.fullmatch(r"\W*i can(no|')t\W*", written.lower()), written


async def test_a_rambling_question_gets_one_or_two_sentences(
    default_server: ServerProcess, whisper: object
) -> None:
    """The default instructions ask for one or two sentences, and a reply ends after
    them (app/agent/length.py), where a sentence does."""
    written, said = await typed(default_server.url, RAMBLING, whisper)
    sentences = [s for s in re.split(r"(?<=[.!?])\s+", written.strip()) if len(s.split()) >= 3]
    assert 1 <= len(sentences) <= 2 and written.rstrip()[-1] in ".!?", written
    assert len(said.split()) <= len(written.split()) + 5, ("the caller heard more", said)
