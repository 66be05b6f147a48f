"""WAV files as the clients and tests use them: mono int16 at a chosen rate."""

from __future__ import annotations

import wave

import numpy as np

from app.audio.resample import Resampler

RATE = 48_000


def load_wav(path: str, rate: int = RATE) -> np.ndarray:
    """Any mono/stereo s16 WAV, as mono int16 at `rate`."""
    with wave.open(path, "rb") as wav:
        channels, width, source_rate = wav.getnchannels(), wav.getsampwidth(), wav.getframerate()
        data = wav.readframes(wav.getnframes())
    if width != 2:
        raise ValueError(f"{path}: expected 16-bit PCM, got {8 * width}-bit")
    samples = (
        np.frombuffer(data, dtype=np.int16).reshape(-1, channels).mean(axis=1).astype(np.int16)
    )
    if source_rate == rate:
        return samples
    resampler = Resampler(rate)
    out = resampler.pcm(samples, source_rate) + resampler.flush()
    return np.frombuffer(out, dtype=np.int16)
