"""The agent's own voice taken out of what the caller sends back: acoustic echo
cancellation on the server, with what the server itself played as the reference.

A caller without echo cancellation (a speakerphone, a SIP phone or trunk, a gateway leg)
sends the agent's voice back, late and quieter. The playout records what it sends on its
pacing clock (EchoReference); the canceller (WebRTC's AEC3, as browsers run it) takes
each 10 ms the caller sends, with the reference audio that was playing when it arrived,
and subtracts the echo it learns to predict. The echo path is the network's round trip
plus the caller's room: AEC3's delay estimator finds it (measured to 500 ms), so the
timelines only need to be right to that.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable
from typing import Protocol

import numpy as np

from app.audio.echo_presence import EchoPresence
from app.audio.resample import Resampler

log = logging.getLogger(__name__)

RATE = 16_000
FRAME = RATE // 100  # AEC3 works on 10 ms
# Reference kept behind the present: the longest echo path AEC3 follows, with room.
HISTORY_S = 1.0
# The caller's audio is placed on the clock by counting its samples from an anchor, so
# network jitter, or a burst after a stall, does not move the echo path under AEC3
# (which takes seconds to find it again). Audio that arrives consistently later than the
# count says, over a whole second, had a gap (silence suppression, lost packets): the
# anchor moves by the least lateness seen. Audio that arrives early moves it at once.
SETTLE_S = 1.0
GAP_S = 0.04
JOIN_S = 0.05
# A frame the canceller made this much quieter was the agent's echo; the caller talking
# over it keeps a frame within a few dB (AEC3 took 2-5 dB off near speech in double talk).
ECHO_DB = 12.0
CONVERGED_FRAMES = 200  # 2 s of the agent's voice: AEC3 has found the echo path by then


class Played(Protocol):
    """A playout that can record what it plays (audio/playout.py, audio/pushed_playout.py)."""

    rate: int
    reference: EchoReference | None


class EchoReference:
    """What the agent played, on the monotonic clock, at 16 kHz: written by the playout
    as frames go out (or, for a socket, when the client will play them), read by the
    canceller for the moments the caller's audio was captured."""

    def __init__(self, rate: int, *, now: Callable[[], float] = time.monotonic) -> None:
        self._rate = rate
        self._resampler = Resampler(RATE) if rate != RATE else None
        self._now = now
        self._segments: deque[tuple[float, np.ndarray]] = deque()  # (start time, samples)
        self._end = 0.0  # when the last segment ends

    def played(self, pcm: bytes, at: float) -> None:
        """`pcm` (s16 mono at the playout's rate) starts playing at `at`."""
        samples = np.frombuffer(pcm, dtype=np.int16)
        if self._resampler is not None:
            samples = np.frombuffer(self._resampler.pcm(samples, self._rate), dtype=np.int16)
        if not len(samples):
            return
        # Audio that follows on joins what came before, whatever the resampler held
        # back: the reference stays gapless, its delay constant.
        if abs(at - self._end) < JOIN_S:
            at = self._end
        self._segments.append((at, samples))
        self._end = max(self._end, at + len(samples) / RATE)
        horizon = self._now() - HISTORY_S
        while self._segments and self._ends(self._segments[0]) < horizon:
            self._segments.popleft()

    def forget_after(self, at: float) -> None:
        """Audio due after `at` will not play (the client's buffer was cleared)."""
        while self._segments and self._segments[-1][0] >= at:
            self._segments.pop()
        if self._segments:
            start, samples = self._segments[-1]
            keep = max(0, int((at - start) * RATE))
            if keep < len(samples):
                self._segments[-1] = (start, samples[:keep])
        self._end = min(self._end, at)

    def window(self, end: float, samples: int) -> np.ndarray:
        """The `samples` played up to `end` (zeros where nothing played)."""
        out = np.zeros(samples, dtype=np.int16)
        start = end - samples / RATE
        for seg_start, seg in self._segments:  # in order of start
            if seg_start >= end:
                break
            if seg_start + len(seg) / RATE <= start:
                continue
            src = max(0, round((start - seg_start) * RATE))
            dst = max(0, round((seg_start - start) * RATE))
            n = min(len(seg) - src, samples - dst)
            if n > 0:
                out[dst : dst + n] = seg[src : src + n]
        return out

    @staticmethod
    def _ends(segment: tuple[float, np.ndarray]) -> float:
        return segment[0] + len(segment[1]) / RATE


class EchoCanceller:
    """One per call: the caller's 16 kHz audio in, the same with the agent's echo taken
    out. If the canceller fails, it says so once and passes audio through untouched."""

    def __init__(
        self,
        reference: EchoReference,
        *,
        session_id: str = "",
        now: Callable[[], float] = time.monotonic,
    ) -> None:
        from pywebrtc_audio import EchoCanceller as Aec3

        self._aec = Aec3(sample_rate=RATE)
        self._reference = reference
        self._session_id = session_id
        self._now = now
        self._anchor: float | None = None  # clock time of the next sample in
        self._least_late = float("inf")  # in this second of audio
        self._counted = 0  # samples in this second
        self.failed = False
        self.presence = EchoPresence()
        # Audio in and out while the agent played, once AEC3 had time to converge: the
        # echo return loss enhancement (bench/echo.py).
        self._reference_frames = 0
        self.energy_in = 0.0
        self.energy_out = 0.0

    def process(self, pcm16k: bytes) -> tuple[bytes, bytes]:
        """The audio that just arrived (whole 10 ms frames), echo removed, and as the
        voice detector should hear it.

        Where no echo is coming back, both are the caller's audio untouched: AEC3, until
        it has found the echo path, takes down a caller talking over the agent too.

        In double talk AEC3's suppressor chops the caller's speech, which a voice
        detector then hears as stops and starts: it hears the microphone itself in the
        frames the canceller took little out of (the caller's, or no echo at all), and
        the cancelled audio only where it took out most (the agent's echo)."""
        if self.failed or not pcm16k:
            return pcm16k, pcm16k
        arrived = self._now()
        near = np.frombuffer(pcm16k, dtype=np.int16)
        # The stream's clock: counted in samples from an anchor, so jitter does not
        # move the echo path; the first sample just in was captured at `start`.
        start = arrived - len(near) / RATE
        self._place(start, len(near))
        assert self._anchor is not None
        end = self._anchor + len(near) / RATE
        far = self._reference.window(end, len(near))
        self._anchor = end
        try:
            out = np.concatenate(
                [
                    self._aec.process(near[i : i + FRAME], far[i : i + FRAME])
                    for i in range(0, len(near), FRAME)
                ]
            )
        except Exception:
            self.failed = True
            log.exception(
                "echo cancellation failed; this call goes on without it",
                extra={"session_id": self._session_id},
            )
            return pcm16k, pcm16k
        if far.any():
            self._reference_frames += len(near) // FRAME
            if self._reference_frames > CONVERGED_FRAMES:
                self.energy_in += float(np.dot(near.astype(np.float64), near))
                self.energy_out += float(np.dot(out.astype(np.float64), out))
        self.presence.update(near, far)
        if not self.cancels:
            return pcm16k, pcm16k
        out = out.astype(np.int16)
        return out.tobytes(), _echo_gated(near, out).tobytes()

    def _place(self, start: float, samples: int) -> None:
        """Move the anchor if the audio starting at `start` (by its arrival) says so."""
        if self._anchor is None or start < self._anchor:
            self._anchor = start
            return
        self._least_late = min(self._least_late, start - self._anchor)
        self._counted += samples
        if self._counted >= SETTLE_S * RATE:
            if self._least_late > GAP_S:
                self._anchor += self._least_late
            self._least_late, self._counted = float("inf"), 0

    @property
    def converged(self) -> bool:
        """AEC3 has had the agent's voice long enough to have found the echo path, and
        there is an echo on this line: its output can be trusted from now on."""
        return not self.failed and self.presence.seen and self._reference_frames > CONVERGED_FRAMES

    @property
    def cancels(self) -> bool:
        """Its output is used: converged, or the agent's voice is coming back now, or
        too little of it has played yet to tell."""
        return self.converged or self.presence.now is not False

    @property
    def erle_db(self) -> float | None:
        """How much quieter the audio got while the agent was playing, once converged,
        in dB (None before that)."""
        if not self.energy_in or not self.energy_out:
            return None
        return float(10 * np.log10(self.energy_in / self.energy_out))


def _echo_gated(near: np.ndarray, out: np.ndarray) -> np.ndarray:
    """`near` where the canceller left most of a frame, `out` where it took out more than
    ECHO_DB of it."""
    frames_in = near.reshape(-1, FRAME).astype(np.float64)
    frames_out = out.reshape(-1, FRAME).astype(np.float64)
    energy_in = np.einsum("ij,ij->i", frames_in, frames_in)
    energy_out = np.einsum("ij,ij->i", frames_out, frames_out)
    echo = energy_out * 10 ** (ECHO_DB / 10) < energy_in
    return np.where(echo[:, np.newaxis], out.reshape(-1, FRAME), near.reshape(-1, FRAME)).ravel()
