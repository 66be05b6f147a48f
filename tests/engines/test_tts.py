"""Kokoro through our engine: bundled defaults, explicit paths (as for upstream files), errors."""

from __future__ import annotations

import numpy as np
import pytest

from app.config import TtsSettings
from app.engines.tts import KokoroTTS, bundled_model_files
from app.errors import EngineError


async def test_bundled_defaults_speak_english() -> None:
    tts = KokoroTTS(TtsSettings())
    speech = await tts.synthesize("Hello there, how are you?")
    assert speech.rate == 24_000
    assert 1.0 < speech.duration_s < 4.0
    assert float(np.abs(speech.samples).max()) > 0.1
    tts.close()


async def test_model_and_voices_can_be_given_as_paths() -> None:
    model, voices = bundled_model_files()
    tts = KokoroTTS(TtsSettings(model_path=model, voices_path=voices, voice="jm_kumo", speed=1.2))
    assert "jf_alpha" in tts.voices and "jm_kumo" in tts.voices
    slow = KokoroTTS(TtsSettings(model_path=model, voices_path=voices, voice="jm_kumo"))
    fast_speech = await tts.synthesize("One two three four five.")
    slow_speech = await slow.synthesize("One two three four five.")
    assert fast_speech.duration_s < slow_speech.duration_s, "speed is applied"
    other = await tts.synthesize("One two three four five.", voice="jf_alpha")
    assert not np.array_equal(other.samples[:1000], fast_speech.samples[:1000])
    tts.close()
    slow.close()


def test_an_unknown_voice_names_the_ones_there_are() -> None:
    with pytest.raises(EngineError, match="jf_alpha"):
        KokoroTTS(TtsSettings(voice="af_nobody"))


def test_an_unavailable_provider_is_a_clear_error() -> None:
    with pytest.raises(EngineError, match="not in this onnxruntime build"):
        KokoroTTS(TtsSettings(provider="NoSuchExecutionProvider"))
