"""Whisper (faster-whisper, tiny.en bundled) on speech made by espeak-ng."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from app.audio.resample import Resampler
from app.config import SttSettings
from app.engines.stt import WhisperSTT
from clients import load_wav
from tests.support.speech import word_error_rate

SENTENCES = ["How are you today?", "Please turn on the lights in the kitchen."]


def pcm16k(path: Path) -> bytes:
    resampler = Resampler(16_000)
    return resampler.pcm(load_wav(str(path)), 48_000) + resampler.flush()


@pytest.fixture(scope="module", params=[30.0, 20.0], ids=["full-window", "short-window"])
def stt(request: pytest.FixtureRequest) -> WhisperSTT:
    return WhisperSTT(SttSettings(min_window_s=request.param))


@pytest.mark.parametrize("text", SENTENCES)
async def test_transcribes_speech(
    stt: WhisperSTT, speech: Callable[[str], Path], text: str
) -> None:
    heard = (await stt.transcribe(pcm16k(speech(text)))).text
    assert word_error_rate(text, heard) <= 0.25, heard
    # A short window must not make Whisper run on and repeat itself.
    assert len(heard.split()) <= len(text.split()) + 2


async def test_silence_is_no_words(stt: WhisperSTT) -> None:
    assert (await stt.transcribe(bytes(32_000))).text == ""
    assert (await stt.transcribe(b"")).text == ""


def test_the_short_window_is_used_only_below_30_s() -> None:
    assert WhisperSTT(SttSettings())._fast is None
    assert WhisperSTT(SttSettings(min_window_s=20))._fast is not None
    assert WhisperSTT(SttSettings(min_window_s=20, language=""))._fast is not None, (
        "tiny.en is English-only, so no language is needed"
    )


async def test_word_scores_when_asked_for(stt: WhisperSTT, speech: Callable[[str], Path]) -> None:
    text = SENTENCES[1]
    heard = await stt.transcribe(pcm16k(speech(text)), logprobs=True)
    assert heard.words, "a score for every word"
    assert word_error_rate(text, "".join(w.word for w in heard.words)) <= 0.25
    assert all(w.logprob <= 0 for w in heard.words)
    assert sum(w.logprob for w in heard.words) / len(heard.words) > -1.0, "clear speech, sure"
    plain = await stt.transcribe(pcm16k(speech(text)))
    assert plain.words is None
