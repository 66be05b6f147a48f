"""Is the agent's voice coming back on this line, right now?

AEC3 learns the echo path in its first seconds of the agent's voice, and until then it
takes down whatever the caller sends while the agent speaks, as if it were all echo. On
a line that sends no echo back (most phones, most gateways) that is only the caller,
talking over the first reply. So the canceller's output is used only where echo is
there to cancel: where the loudness of the caller's audio, 10 ms at a time over a
second, follows the loudness of what was played a moment earlier. An echo follows it
closely (measured on espeak-ng speech through a room: a correlation of 0.89-0.98 at
6-20 dB return loss, 40-250 ms late); the caller's own speech does not (at most 0.60),
nor does the caller talking over an echo (0.57).
"""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

FRAME = 160  # 10 ms at 16 kHz
WINDOW = 100  # frames of the caller's audio compared: 1 s
MAX_LAG = 50  # frames the echo may come back after its reference: 500 ms
EVERY = 10  # frames between judgements
ECHO_CORRELATION = 0.8
MIN_PLAYING = 20  # frames of the agent's voice in view before judging
PLAYING_RMS = 33.0  # a reference frame louder than this (-60 dBFS) was the agent's voice


class EchoPresence:
    """Fed whole frames of the caller's audio with the reference they were cancelled
    against. `now`: echo heard in the last WINDOW (True), none possible or none heard
    (False), or too little of the agent's voice in view to say (None). `seen`: echo
    has been heard on this line at least once."""

    def __init__(self) -> None:
        # Silence before the call: nothing played, nothing heard.
        self._near = np.zeros(WINDOW)
        self._far = np.zeros(WINDOW + MAX_LAG)
        self._frames = 0
        self.now: bool | None = False
        self.seen = False

    def update(self, near: np.ndarray, far: np.ndarray) -> None:
        heard = _loudness(near)
        self._near = np.concatenate([self._near, heard])[-WINDOW:]
        self._far = np.concatenate([self._far, _loudness(far)])[-(WINDOW + MAX_LAG) :]
        self._frames += len(heard)
        if self._frames >= EVERY:
            self._frames = 0
            self.now = self._judge()
            self.seen = self.seen or bool(self.now)

    def _judge(self) -> bool | None:
        playing = int(np.count_nonzero(self._far > PLAYING_RMS))
        if not playing:
            return False
        if playing < MIN_PLAYING:
            return None
        # Each row: the reference WINDOW frames long, ending `lag` frames before now.
        lagged = sliding_window_view(self._far, WINDOW)
        near = self._near - self._near.mean()
        far = lagged - lagged.mean(axis=1, keepdims=True)
        scale = np.sqrt((far * far).sum(axis=1) * float(near @ near))
        with np.errstate(invalid="ignore", divide="ignore"):
            correlation = np.where(scale > 0, far @ near / scale, 0.0)
        return bool(correlation.max() >= ECHO_CORRELATION)


def _loudness(samples: np.ndarray) -> np.ndarray:
    """The RMS of each whole 10 ms frame. Linear, not in dB: the loud frames decide,
    not the quiet ones between words, which a room's reverberation fills."""
    frames = samples[: len(samples) - len(samples) % FRAME].reshape(-1, FRAME)
    frames = frames.astype(np.float64)
    return np.sqrt(np.einsum("ij,ij->i", frames, frames) / FRAME)
