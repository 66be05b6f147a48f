"""After the user's last words, the agent is heard answering them: speaking again at any
moment of a reply's life, a pause inside a question, a correction, a backchannel or a
cough never leave it silent. Engine doubles and the real paced track; the same with the
real engines over WebRTC is tests/e2e/test_never_silent.py.

The double of Whisper hears a word in how loud the noise is: each word of the script is
noise of its own level, so a turn's transcript says which pieces of speech it holds.
"""

from __future__ import annotations

import asyncio
import os
import time
from dataclasses import dataclass

import numpy as np
import pytest

from app.session import messages as msg
from app.session.session import Session
from tests.session.fakes import (
    FakeLLM,
    FakeSTT,
    FakeTTS,
    MessageLog,
    Speaker,
    make_session,
    silence,
)
from tests.session.test_bargein import play_script

# Levels (noise std) a word apart: 22% steps, 3.5 sigmas of a 40 ms window's RMS; the
# quietest well above what webrtcvad takes for speech every time.
WORDS = ("Apples.", "Boats.", "Cats.", "Dogs.", "Eggs.", "Figs.", "Goats.", "Hats.")
LEVELS = {round(2000 * 1.22**i): word for i, word in enumerate(WORDS)}
BACKCHANNEL, BACKCHANNEL_STD = "Mm-hmm.", 9800
COUGH_STD = 12000  # a sound with no words
LEVELS |= {BACKCHANNEL_STD: BACKCHANNEL, COUGH_STD: ""}
STD_OF = {word: std for std, word in LEVELS.items() if word}
WINDOW = 640  # samples: 40 ms


def said(rng: np.random.Generator, word: str, ms: int) -> bytes:
    std = STD_OF[word] if word else COUGH_STD
    return np.clip(rng.normal(0, std, 16 * ms), -32768, 32767).astype(np.int16).tobytes()


def hear(pcm: bytes) -> str:
    """The words in `pcm`, in order: each level held for two windows or more. Silence
    ends a run: the windows at a cough's end and a backchannel's start, each half sound,
    are not one word between them."""
    samples = np.frombuffer(pcm, dtype=np.int16).astype(np.float64)
    windows = samples[: len(samples) // WINDOW * WINDOW].reshape(-1, WINDOW)
    runs: list[list[str | int | None]] = []  # [word (None: silence), windows]
    for rms in np.sqrt((windows**2).mean(axis=1)):
        word = LEVELS[min(LEVELS, key=lambda std: abs(np.log(std / rms)))] if rms > 1500 else None
        if runs and runs[-1][0] == word:
            runs[-1][1] = int(runs[-1][1]) + 1
        else:
            runs.append([word, 1])
    words: list[str] = []
    for word, count in runs:
        if int(count or 0) >= 2 and word and (not words or words[-1] != word):
            words.append(str(word))
    return " ".join(words)


def test_the_whisper_double_hears_each_level_as_its_word() -> None:
    rng = np.random.default_rng(0)
    pcm = silence(300) + said(rng, "Cats.", 500) + silence(300) + said(rng, "Figs.", 300)
    assert hear(pcm + said(rng, "", 200) + said(rng, BACKCHANNEL, 300)) == "Cats. Figs. Mm-hmm."


@dataclass(frozen=True)
class Utterance:
    text: str  # a word, the backchannel, or "" for a cough
    start_s: float
    end_s: float


def conversation(rng: np.random.Generator) -> tuple[list[tuple[float, bytes]], list[Utterance]]:
    """A random script: words, backchannels and coughs, with pauses inside a turn (under
    the 500 ms silence window), between turns before the reply is heard, and during it."""
    script: list[tuple[float, bytes]] = [(0.0, silence(500))]
    spoken: list[Utterance] = []
    words = list(rng.permutation(WORDS))
    at = 0.5
    for _ in range(int(rng.integers(2, 6))):
        kind = rng.choice(["word", "word", "word", "backchannel", "cough"])
        if kind == "word" and words:
            text, ms = str(words.pop()), int(rng.integers(20, 60)) * 20
        elif kind == "backchannel":
            text, ms = BACKCHANNEL, int(rng.integers(15, 35)) * 20
        else:
            text, ms = "", int(rng.integers(8, 12)) * 20
        script.append((at, said(rng, text, ms)))
        spoken.append(Utterance(text, at, at + ms / 1000))
        at += ms / 1000
        low, high = [(0.1, 0.4), (0.5, 1.5), (1.5, 3.0)][int(rng.integers(0, 3))]
        gap_ms = int(rng.uniform(low, high) * 50) * 20
        script.append((at, silence(gap_ms)))
        at += gap_ms / 1000
    script.append((at, silence(1000)))
    return script, spoken


async def settled(session: Session, sent: MessageLog, audio: Speaker, timeout_s: float) -> None:
    """Until nothing has happened for a second: no job, no audio, every reply ended."""
    deadline = time.monotonic() + timeout_s
    quiet_since = time.monotonic()
    seen = -1
    while time.monotonic() < deadline:
        idle = not session.busy and session.reply is None and audio.playout.idle
        if not idle or len(sent) != seen:
            quiet_since, seen = time.monotonic(), len(sent)
        elif time.monotonic() - quiet_since >= 1.0:
            return
        await asyncio.sleep(0.05)


def broken_promises(
    sent: MessageLog, audio: Speaker, spoken: list[Utterance], t0: float
) -> list[str]:
    """What the conversation owes the user and did not give: empty if none."""
    problems: list[str] = []
    started = {m.response_id for m in sent.of(msg.ReplyStarted)}
    ended = {m.response_id for m in sent.of(msg.ReplyEnded)}
    if started - ended:
        problems.append(f"responses created and never done: {sorted(started - ended)}")
    if audio.playout.paused:
        problems.append("the playout was left paused")
    if told := sent.of(msg.Problem):
        problems.append(f"problems told: {told}")
    transcribed = " ".join(m.transcript for m in sent.of(msg.UserTranscribed))
    words = [u for u in spoken if u.text and u.text != BACKCHANNEL]
    if lost := [u.text for u in words if u.text not in transcribed]:
        problems.append(f"words never transcribed: {lost}")
    if not words:
        return problems
    last = words[-1]
    answers = sent.of(msg.ReplyEnded)
    if not any(m.status == "completed" and last.text in m.text for m in answers):
        problems.append(f"the last words, {last.text!r}, were never answered in full")
    voiced = [at for at in audio.voiced_times() if at > t0 + last.end_s]
    if not voiced:
        problems.append(f"no audio was heard after the last words, {last.text!r}")
    return problems


async def talk(seed: int) -> list[str]:
    """One random conversation; what it broke, each line naming its seed."""
    rng = np.random.default_rng(seed)
    script, spoken = conversation(rng)
    session, sent, audio, engines = make_session(resume_window_ms=1500)
    assert isinstance(engines.stt, FakeSTT) and isinstance(engines.llm, FakeLLM)
    assert isinstance(engines.tts, FakeTTS)
    engines.stt.hear = hear
    engines.stt.delay_s = float(rng.uniform(0.01, 0.5))
    engines.llm.echo_question = True
    engines.llm.delay_s = float(rng.uniform(0.01, 0.1))
    engines.tts.delay_s = float(rng.uniform(0.01, 0.6))
    engines.tts.seconds_per_word = 0.1
    t0 = time.monotonic()
    await play_script(session, script)
    await settled(session, sent, audio, timeout_s=30)
    said_ = ", ".join(f"{u.text or '(cough)'} {u.start_s:.2f}-{u.end_s:.2f}" for u in spoken)
    return [f"seed {seed} ({said_}): {p}" for p in broken_promises(sent, audio, spoken, t0)]


# Seeds that once broke the invariant, run every time.
# 13084: a speculation begun after a backchannel; 262524: the double heard "Hats." in the
# edges of a cough and a backchannel 160 ms apart (silence did not end a run).
REGRESSIONS: list[int] = [13084, 262524]
CONVERSATIONS = 12


async def test_random_conversations_always_end_with_the_last_words_answered() -> None:
    """VOICE_TEST_SEED replays a failure's conversations (its seed first);
    VOICE_TEST_CONVERSATIONS says how many, for a longer soak."""
    base = int(os.environ.get("VOICE_TEST_SEED", time.time_ns() % 1_000_000))
    count = int(os.environ.get("VOICE_TEST_CONVERSATIONS", CONVERSATIONS))
    seeds = [*REGRESSIONS, *range(base, base + count)]
    broken = [line for lines in await asyncio.gather(*map(talk, seeds)) for line in lines]
    assert not broken, "\n".join(broken)


@pytest.mark.parametrize(
    ("moment", "stt_s", "tts_s"),
    [("while the turn is transcribed", 1.2, 0.01), ("before the first audio", 0.01, 1.5)],
)
async def test_more_words_before_the_reply_is_heard_join_the_question(
    moment: str, stt_s: float, tts_s: float
) -> None:
    """ "What is the capital of France?" ... "Sorry, I mean Italy.": one question, answered
    once, as corrected."""
    rng = np.random.default_rng(1)
    session, sent, audio, engines = make_session()
    assert isinstance(engines.stt, FakeSTT) and isinstance(engines.llm, FakeLLM)
    assert isinstance(engines.tts, FakeTTS)
    engines.stt.hear, engines.stt.delay_s = hear, stt_s
    engines.llm.echo_question = True
    engines.tts.delay_s = tts_s
    t0 = time.monotonic()
    # The turn ends at 2.5 s; the user speaks again at 2.8 s, before any reply is heard.
    script = [(0.0, silence(1000)), (1.0, said(rng, "Apples.", 1000)), (2.0, silence(800)),
              (2.8, said(rng, "Boats.", 800)), (3.6, silence(1000))]  # fmt: skip
    await play_script(session, script)
    await settled(session, sent, audio, timeout_s=20)

    assert broken_promises(sent, audio, [Utterance("Boats.", 2.8, 3.6)], t0) == [], moment
    answers = [m for m in sent.of(msg.ReplyEnded) if m.status == "completed"]
    assert [m.text for m in answers] == ["About Boats., the answer is long and has many words."]
    # The LLM was asked with both pieces, the first unanswered.
    assert engines.llm.prompts[-1][1:] == [
        {"role": "user", "content": "Apples."},
        {"role": "user", "content": "Boats."},
    ], moment
    # Nothing of a reply to the first piece alone was heard, or said to have been.
    assert all(m.heard_ms is None for m in sent.of(msg.ReplyEnded)), moment
    assert sent.of(msg.ReplyAudioStarted)[0].response_id == answers[0].response_id
