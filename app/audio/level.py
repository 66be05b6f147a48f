"""Signal level of s16 samples, for comparing the user's voice with the agent's echo."""

from __future__ import annotations

import math

import numpy as np

SILENT_DB = -100.0


def rms_db(samples: np.ndarray) -> float:
    """RMS level of int16 samples in dBFS; digital silence is SILENT_DB."""
    if not len(samples):
        return SILENT_DB
    values = samples.astype(np.float32)
    rms = float(np.sqrt(np.mean(values * values)))
    return max(SILENT_DB, 20 * math.log10(rms / 32768)) if rms else SILENT_DB


def pcm_db(pcm: bytes) -> float:
    return rms_db(np.frombuffer(pcm, dtype=np.int16))
