"""Telling an echo of the agent's voice from the caller's own speech, by how closely the
caller's loudness follows what was played, with audio made here."""

from __future__ import annotations

import numpy as np
import pytest

from app.audio.echo_presence import FRAME, EchoPresence
from tests.support.rooms import echo, espeak, pcm16
from tests.support.speech import have_espeak

pytestmark = pytest.mark.skipif(not have_espeak(), reason="espeak-ng is not installed")


@pytest.fixture(scope="module")
def voice() -> np.ndarray:
    text = "Here is a long answer about the weather in Paris, which is mild in spring."
    return np.concatenate([espeak(text), espeak("And the rivers are calm in the autumn.")])


@pytest.fixture(scope="module")
def played(voice: np.ndarray) -> np.ndarray:
    return np.frombuffer(pcm16(voice), np.int16)


@pytest.fixture(scope="module")
def caller() -> np.ndarray:
    words = espeak("Wait, no, I meant the other account, the savings one.", voice="en-gb")
    return np.frombuffer(pcm16(words), np.int16)


def judgements(near: np.ndarray, far: np.ndarray) -> list[bool | None]:
    """Feed 20 ms at a time; what the presence said after each judgement (each 100 ms)."""
    presence, said = EchoPresence(), list[bool | None]()
    for i in range(min(len(near), len(far)) // (2 * FRAME)):
        piece = slice(i * 2 * FRAME, (i + 1) * 2 * FRAME)
        presence.update(near[piece], far[piece])
        if i % 5 == 4:
            said.append(presence.now)
    return said


def room(voice: np.ndarray, loss_db: float, delay_ms: int) -> np.ndarray:
    heard = np.frombuffer(pcm16(echo(voice, loss_db=loss_db, delay_ms=delay_ms)), np.int16)
    return heard[: len(voice)]


def over(echoed: np.ndarray, caller: np.ndarray, at: int) -> np.ndarray:
    """The caller's words `at` samples into a microphone that hears `echoed`."""
    mic = echoed.astype(np.int32)
    n = min(len(caller), len(mic) - at)
    mic[at : at + n] += caller[:n]
    return mic.clip(-32768, 32767).astype(np.int16)


@pytest.mark.parametrize(("loss_db", "delay_ms"), [(6, 40), (20, 250)])
def test_an_echo_of_what_was_played_is_heard_as_echo(
    voice: np.ndarray, played: np.ndarray, loss_db: float, delay_ms: int
) -> None:
    said = judgements(room(voice, loss_db, delay_ms), played)
    # Once the window is full of the agent's voice, every judgement says echo.
    assert said[-10:] == [True] * 10


def test_the_callers_own_speech_over_the_agent_is_not_echo(
    played: np.ndarray, caller: np.ndarray
) -> None:
    said = judgements(caller, played)
    assert True not in said and False in said


def test_the_caller_talking_over_an_echo_is_not_echo_while_they_talk(
    voice: np.ndarray, played: np.ndarray, caller: np.ndarray
) -> None:
    at = 16_000  # a second into the agent's voice
    said = judgements(over(room(voice, 6, 120), caller, at), played)
    # One judgement each 100 ms: echo until the caller speaks, then none while they do.
    before, during = said[2:10], said[11 : 10 + min(len(caller), len(voice) - at) // 1600]
    assert before == [True] * len(before)
    assert during and during == [False] * len(during)


def test_nothing_played_is_no_echo_and_little_played_is_too_soon_to_say(
    caller: np.ndarray, played: np.ndarray
) -> None:
    assert set(judgements(caller, np.zeros_like(caller))) == {False}
    presence = EchoPresence()
    presence.update(played[: 10 * FRAME], played[: 10 * FRAME])
    assert presence.now is None and not presence.seen
