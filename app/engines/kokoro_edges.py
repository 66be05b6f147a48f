"""Kokoro's silence at a piece's two ends, cut to the pause the text calls for.

Kokoro voices its padding tokens as noise ~58 dB under the speech: 150-200 ms before the
first word and 300-500 ms after the last, in every piece. A reply is spoken piece by
piece, so that padding was a hole of 0.5-0.7 s at each join, mid-sentence too ("The
capital of France [0.6 s] is Paris."), and 150-200 ms added to the first word's wait.
What is left at a join is what a speaker would leave: a sentence's pause, a clause's,
or next to nothing inside a phrase."""

from __future__ import annotations

import numpy as np

from app.vocab.punctuation import CLAUSE_END, SENTENCE_END, WIDE_CLAUSE_END, WIDE_SENTENCE_END

FRAME_S = 0.01
QUIET_DB = -50  # under the piece's loudest frame; the padding sits near -58
SILENT_DBFS = -60  # and under this, whatever the loudest frame: there is nothing to cut to
LEAD_S = 0.05  # kept before the first sound: soft onsets ("b", "h") start under QUIET_DB
TAIL_S = 0.04  # kept after the last sound, as it decays
FADE_S = 0.01  # at a cut, so it does not click
SENTENCE_PAUSE_S = 0.25
CLAUSE_PAUSE_S = 0.12
CLOSING = "\"')]}»”’」』"  # quotes and brackets after the mark ("Stop!")


def pause_after(text: str) -> float:
    """The silence a piece ending with `text` calls for before the next one."""
    end = text.rstrip().rstrip(CLOSING)[-1:]
    if end and end in SENTENCE_END + WIDE_SENTENCE_END:
        return SENTENCE_PAUSE_S
    if end and end in CLAUSE_END + WIDE_CLAUSE_END:
        return CLAUSE_PAUSE_S
    return 0.0


def tightened(
    samples: np.ndarray, rate: int, text: str, *, head: bool = True, tail: bool = True
) -> np.ndarray:
    """`samples` of `text` from just before its first sound to just after its last, then
    the pause its last mark calls for; as they are when nothing in them is louder than
    the padding. A piece's first part (kokoro_stream) has only its `head` cut, the rest
    only its `tail`."""
    frame = max(1, int(rate * FRAME_S))
    frames = len(samples) // frame
    if frames == 0:
        return samples
    power = np.mean(np.square(samples[: frames * frame].reshape(frames, frame)), axis=1)
    quiet = max(float(power.max()) * 10 ** (QUIET_DB / 10), 10 ** (SILENT_DBFS / 10))
    loud = np.flatnonzero(power > quiet)
    if len(loud) == 0:
        return samples
    start = max(0, loud[0] * frame - int(LEAD_S * rate)) if head else 0
    end = min(len(samples), (loud[-1] + 1) * frame + int(TAIL_S * rate)) if tail else len(samples)
    kept = samples[start:end].copy()
    fade = min(len(kept), int(FADE_S * rate))
    if start > 0:
        kept[:fade] *= np.linspace(0, 1, fade, dtype=kept.dtype)
    if end < len(samples):
        kept[len(kept) - fade :] *= np.linspace(1, 0, fade, dtype=kept.dtype)
    pause = np.zeros(int(pause_after(text) * rate) if tail else 0, dtype=samples.dtype)
    return np.concatenate([kept, pause])
