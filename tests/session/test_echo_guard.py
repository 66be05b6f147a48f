"""The echo guard's bookkeeping (app/session/listening/bargein.py), frame by frame: the
real turn detector, over a voice detector that calls every sound speech, so only the
levels decide. The agent plays at -16 dBFS and the guard's line is 10 dB under it."""

from __future__ import annotations

import numpy as np
import pytest

from app.audio.level import pcm_db
from app.audio.vad import TurnDetector
from app.config import VadSettings
from app.session.listening.bargein import BargeIn

AGENT_DB = -16.0
FRAME_MS = 20


class EverySound:
    """Speech wherever there is sound: the levels alone decide what the guard counts."""

    def is_speech(self, frame: bytes) -> bool:
        return pcm_db(frame) > -60

    def hangover_frames(self, frame_ms: int) -> int:
        return 0

    def reset(self) -> None: ...


def frames(db: float, ms: int) -> list[bytes]:
    rng = np.random.default_rng(int(-db * 10) + ms)
    rms = 32768 * 10 ** (db / 20)
    samples = np.clip(rng.normal(0, rms, 16 * ms), -32768, 32767).astype(np.int16)
    return [samples[i : i + 16 * FRAME_MS].tobytes() for i in range(0, len(samples), 16 * FRAME_MS)]


def confirmed(*pieces: tuple[float, int]) -> bool:
    """Whether the user's speech, given as (dBFS, ms) pieces over the agent's voice, would
    barge in."""
    settings = VadSettings(echo_guard=True, echo_margin_db=-10.0, background_db=0)
    detector = TurnDetector(settings, voice=EverySound())
    guard = BargeIn(settings)
    said = False
    for db, ms in pieces:
        for frame in frames(db, ms):
            detector.push(frame)
            said = guard.update(frame, detector, AGENT_DB) or said
    return said


@pytest.mark.parametrize(
    ("pieces", "barges_in"),
    [
        # "Wait,": 160 ms over the line, then its softer end under it (-30 dBFS).
        ([(-18, 160), (-30, 100), (-100, 200)], True),
        # The same end without the word before it: the agent's echo, never counted.
        ([(-30, 400), (-100, 200)], False),
        # An echo whose loudest syllable passes for 40 ms: the run does not count on.
        ([(-30, 160), (-20, 40), (-30, 200), (-100, 200)], False),
        # A word that passed, a pause, then only echo: the pause ends what counts on.
        ([(-18, 160), (-100, 100), (-30, 200), (-100, 200)], False),
    ],
)
def test_a_run_that_passed_the_guard_counts_to_its_end(
    pieces: list[tuple[float, int]], barges_in: bool
) -> None:
    assert confirmed(*pieces) is barges_in
