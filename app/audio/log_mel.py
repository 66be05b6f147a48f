"""What the Smart Turn model reads: Whisper-style log-mel features of the last 8 s.

The audio is 16 kHz, left-padded with silence to 8 s (or cut to its last 8 s),
normalized to zero mean and unit variance, then turned into 80 log-mel bins
per 10 ms: an (80, 800) array. faster-whisper's feature extractor does the
Whisper part.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

RATE = 16_000
WINDOW_S = 8
WINDOW = RATE * WINDOW_S
MEL_BINS = 80


@lru_cache(maxsize=1)
def _extractor() -> object:
    from faster_whisper.feature_extractor import FeatureExtractor

    return FeatureExtractor(feature_size=MEL_BINS, sampling_rate=RATE, chunk_length=WINDOW_S)


def smart_turn_features(pcm16k: bytes) -> np.ndarray:
    """(80, 800) float32 features of the end of an utterance (16 kHz mono s16)."""
    samples = np.frombuffer(pcm16k, dtype=np.int16)[-WINDOW:].astype(np.float32) / 32768.0
    audio = np.zeros(WINDOW, dtype=np.float32)
    audio[WINDOW - len(samples) :] = samples
    audio = (audio - audio.mean()) / np.sqrt(audio.var() + 1e-7)
    features = _extractor()(audio, padding=0)  # type: ignore[operator]
    return np.asarray(features, dtype=np.float32)
