"""Kokoro's padding cut at a piece's ends, and the pause its text calls for put back."""

from __future__ import annotations

import numpy as np
import pytest

from app.engines.kokoro_edges import (
    CLAUSE_PAUSE_S,
    LEAD_S,
    SENTENCE_PAUSE_S,
    TAIL_S,
    pause_after,
    tightened,
)

RATE = 24_000
rng = np.random.default_rng(3)


def piece(lead_s: float, sound_s: float, tail_s: float) -> np.ndarray:
    """Padding noise 58 dB under a tone, as Kokoro voices its pad tokens around speech."""
    noise = lambda s: rng.normal(0, 0.5 * 10 ** (-58 / 20), int(s * RATE))  # noqa: E731
    tone = 0.5 * np.sin(2 * np.pi * 220 * np.arange(int(sound_s * RATE)) / RATE)
    return np.concatenate([noise(lead_s), tone, noise(tail_s)]).astype(np.float32)


@pytest.mark.parametrize(
    ("text", "pause_s"),
    [
        ("The capital of France", 0.0),
        ("is Paris.", SENTENCE_PAUSE_S),
        ("Really?", SENTENCE_PAUSE_S),
        ('He said "stop!"', SENTENCE_PAUSE_S),
        ("First of all,", CLAUSE_PAUSE_S),
        ("パリです。", SENTENCE_PAUSE_S),
        ("はい、", CLAUSE_PAUSE_S),
    ],
)
def test_a_piece_keeps_its_sound_and_the_pause_its_text_calls_for(
    text: str, pause_s: float
) -> None:
    assert pause_after(text) == pause_s
    samples = piece(0.18, 1.0, 0.45)
    out = tightened(samples, RATE, text)
    assert len(out) / RATE == pytest.approx(LEAD_S + 1.0 + TAIL_S + pause_s, abs=0.011)
    loud = np.flatnonzero(np.abs(out) > 0.1)
    assert loud[0] / RATE == pytest.approx(LEAD_S, abs=0.011), "LEAD_S before the first sound"
    # The sound itself is untouched: the tone, sample for sample.
    start = int(0.18 * RATE)
    offset = start - int(LEAD_S * RATE)
    np.testing.assert_array_equal(out[start - offset : start - offset + RATE],
                                  samples[start : start + RATE])  # fmt: skip
    assert not out[len(out) - int(pause_s * RATE) :].any(), "the pause is silence"


def test_audio_with_nothing_above_its_padding_is_left_as_it_is() -> None:
    for samples in (np.zeros(4800, np.float32), piece(0.2, 0.0, 0.2), np.zeros(10, np.float32)):
        np.testing.assert_array_equal(tightened(samples, RATE, "Hm."), samples)
