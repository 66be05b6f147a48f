from __future__ import annotations

import warnings

import numpy as np
import pytest

from app.audio import g711


@pytest.mark.parametrize("law", ["ulaw", "alaw"])
def test_decoding_is_the_standards(law: g711.Law) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        audioop = pytest.importorskip("audioop")  # CPython's own, until 3.13
    codes = bytes(range(256))
    reference = audioop.ulaw2lin(codes, 2) if law == "ulaw" else audioop.alaw2lin(codes, 2)
    assert g711.decode(codes, law) == reference


@pytest.mark.parametrize("law", ["ulaw", "alaw"])
def test_encoding_picks_the_nearest_code(law: g711.Law) -> None:
    levels = np.unique(np.frombuffer(g711.decode(bytes(range(256)), law), dtype=np.int16))
    every = np.arange(int(levels[0]), int(levels[-1]) + 1).astype(np.int16)  # beyond: clipped
    back = np.frombuffer(g711.decode(g711.encode(every.tobytes(), law), law), dtype=np.int16)
    error = np.abs(back.astype(np.int32) - every)
    widest_gap = np.diff(levels.astype(np.int32)).max()
    assert error.max() <= widest_gap // 2
    quiet = np.arange(-64, 64, dtype=np.int16)
    quiet_back = np.frombuffer(g711.decode(g711.encode(quiet.tobytes(), law), law), np.int16)
    assert np.abs(quiet_back.astype(np.int32) - quiet).max() <= 8, "fine steps near zero"
    assert len(g711.encode(bytes(3200), law)) == 1600, "one byte a sample"
