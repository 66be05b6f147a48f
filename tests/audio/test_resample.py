"""Telephone rates without aliasing: what 8 kHz cannot carry is filtered out on the way down,
and nothing above 4 kHz is made up on the way up."""

from __future__ import annotations

import numpy as np
import pytest

from app.audio.resample import Resampler


def tone(hz: float, rate: int, seconds: float = 1.0) -> np.ndarray:
    t = np.arange(int(rate * seconds)) / rate
    return (0.5 * np.sin(2 * np.pi * hz * t)).astype(np.float32)


def level_db(pcm: bytes) -> float:
    """RMS in dBFS, after the filter's start-up."""
    x = np.frombuffer(pcm, dtype=np.int16).astype(np.float64) / 32768
    x = x[len(x) // 4 :]
    return float(20 * np.log10(np.sqrt(np.mean(x**2)) + 1e-12))


def to_8k(samples: np.ndarray, rate: int) -> bytes:
    resampler = Resampler(8_000)
    return resampler.pcm(samples, rate) + resampler.flush()


@pytest.mark.parametrize("rate", [16_000, 24_000, 48_000])
def test_downsampling_to_8k_filters_out_what_8k_cannot_carry(rate: int) -> None:
    passband = level_db(to_8k(tone(1_000, rate), rate))
    assert passband == pytest.approx(-9.0, abs=0.5)  # a 0.5 sine, kept whole
    assert level_db(to_8k(tone(3_400, rate), rate)) > passband - 3  # the telephone band
    for hz in (4_400, 6_000, 7_000):
        # Without a filter, these would fold back to 3.6, 2 and 1 kHz at full level.
        assert level_db(to_8k(tone(hz, rate), rate)) < passband - 40, hz


def test_upsampling_from_8k_adds_no_images() -> None:
    resampler = Resampler(16_000)
    pcm = resampler.pcm(tone(1_000, 8_000), 8_000) + resampler.flush()
    x = np.frombuffer(pcm, dtype=np.int16).astype(np.float64)[4_000:12_000]
    spectrum = np.abs(np.fft.rfft(x * np.hanning(len(x))))
    freqs = np.fft.rfftfreq(len(x), 1 / 16_000)
    image = spectrum[(freqs > 6_900) & (freqs < 7_100)].max()  # 8 kHz - 1 kHz
    assert 20 * np.log10(image / spectrum.max()) < -60
