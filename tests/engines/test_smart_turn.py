"""Smart Turn v3.2 (from the pipecat-ai wheel) on speech made by espeak-ng."""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest

from app.audio.log_mel import smart_turn_features
from app.config import TurnSettings
from app.engines.smart_turn import SmartTurn
from app.errors import EngineError
from clients import load_wav
from tests.support.speech import have_espeak

# espeak-ng's flat prosody makes some phrases ambiguous to the model; these are not.
FINISHED = [
    "What is the capital of France?",
    "Can you tell me a joke?",
    "Set a timer for ten minutes.",
]
UNFINISHED = ["I want to", "So what I was thinking is", "Let me think, um"]


def utterance(text: str, tmp_path: Path) -> bytes:
    """How the session hands it over at the first pause: 300 ms before, 200 ms after."""
    wav = tmp_path / "u.wav"
    subprocess.run(["espeak-ng", "-v", "en-us", "-s", "160", "-w", str(wav), text], check=True)
    samples = load_wav(str(wav), rate=16_000)
    voiced = np.nonzero(np.abs(samples) > 300)[0]
    speech = samples[voiced[0] : voiced[-1] + 1]
    pad = np.zeros(1600, dtype=np.int16)
    return np.concatenate([pad, pad, pad, speech, pad, pad]).tobytes()


@pytest.fixture(scope="module")
def model() -> SmartTurn:
    return SmartTurn(TurnSettings())


@pytest.mark.parametrize("text", FINISHED)
async def test_a_finished_question_is_a_finished_turn(
    model: SmartTurn, text: str, tmp_path: Path
) -> None:
    if not have_espeak():
        pytest.skip("espeak-ng is not installed (make test installs it)")
    assert await model.complete(utterance(text, tmp_path)) > 0.5


@pytest.mark.parametrize("text", UNFINISHED)
async def test_a_phrase_that_trails_off_is_not(model: SmartTurn, text: str, tmp_path: Path) -> None:
    if not have_espeak():
        pytest.skip("espeak-ng is not installed (make test installs it)")
    assert await model.complete(utterance(text, tmp_path)) < 0.5


def test_the_features_are_the_models_own() -> None:
    """Matched against the reference that ships with the model (pipecat's numpy port of
    transformers' WhisperFeatureExtractor, 8 s, normalized)."""
    from pipecat.audio.turn.smart_turn._whisper_features import (
        compute_whisper_log_mel_features,
    )

    rng = np.random.default_rng(7)
    pcm = rng.normal(0, 3000, 16_000 * 3).astype(np.int16)
    reference = compute_whisper_log_mel_features(
        np.pad(pcm.astype(np.float32) / 32768, (16_000 * 5, 0))
    )
    ours = smart_turn_features(pcm.tobytes())
    assert ours.shape == (80, 800) and np.abs(ours - reference).max() < 1e-4
    # Longer than 8 s: only the end counts.
    long = rng.normal(0, 3000, 16_000 * 12).astype(np.int16)
    assert np.array_equal(
        smart_turn_features(long.tobytes()), smart_turn_features(long[-128_000:].tobytes())
    )


def test_a_missing_model_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(EngineError, match="cannot load the turn model"):
        SmartTurn(TurnSettings(model_path=str(tmp_path / "nope.onnx")))
