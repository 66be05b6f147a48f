"""The audio front end: suppression for the turn detector's ears only, and parts that
cannot load or fail are left out with one line in the log."""

from __future__ import annotations

import numpy as np
import pytest

from app.audio import front_end
from app.audio.echo import EchoReference
from app.audio.front_end import FrontEnd
from tests.support.rooms import pcm16, pink_noise


def level_db(pcm: bytes) -> float:
    samples = np.frombuffer(pcm, np.int16).astype(np.float64)
    return float(10 * np.log10(np.mean(samples**2) + 1e-9))


def test_suppression_quietens_what_the_detector_judges_and_not_what_whisper_hears() -> None:
    noise = pcm16(pink_noise(3 * 16_000) * 0.05)
    ears = FrontEnd("sess_test", cancel_echo=False)
    assert ears.process(noise[:640]) == (noise[:640], noise[:640]), "off: untouched"
    ears.suppress("far_field")
    heard, judged = b"", b""
    for offset in range(0, len(noise), 640):
        h, j = ears.process(noise[offset : offset + 640])
        heard, judged = heard + h, judged + j
    assert heard == noise, "Whisper hears the audio as it came"
    settled = slice(32_000, None)  # WebRTC NS learns the noise in its first second
    assert level_db(judged[settled]) < level_db(noise[settled]) - 10


def test_odd_sized_pieces_come_out_in_whole_frames_with_nothing_lost() -> None:
    ears = FrontEnd("sess_test", EchoReference(16_000), cancel_echo=True)
    assert ears.cancelling
    pieces = [bytes(n) for n in (100, 540, 64, 1000)]
    out = [ears.process(piece)[0] for piece in pieces]
    assert all(len(piece) % 320 == 0 for piece in out)
    assert sum(map(len, out)) == 1600, "1704 bytes in: five 10 ms frames out, 104 waiting"


def test_a_part_that_cannot_load_is_said_once_and_calls_go_on_without_it(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def missing(level: int) -> object:
        raise ImportError("No module named 'pywebrtc_audio'")

    monkeypatch.setattr(front_end, "_suppressor", missing)
    monkeypatch.setattr(front_end, "_unavailable", set())
    for _ in range(3):
        ears = FrontEnd("sess_test", cancel_echo=False)
        ears.suppress("near_field")
        assert not ears.suppressing
        assert ears.process(b"\x01\x00" * 160) == (b"\x01\x00" * 160,) * 2
    warned = [r for r in caplog.records if "noise suppression is unavailable" in r.message]
    assert len(warned) == 1
