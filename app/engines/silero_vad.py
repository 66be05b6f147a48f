"""Is this frame speech? Silero VAD v5, one ONNX model per process, a detector per call.

It holds up in noise where webrtcvad does not (vad.detector). The model ships in the
pipecat-ai wheel, so it works offline. A window costs ~0.1 ms on one core, so the
detectors run inline on the event loop, as webrtcvad does.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import numpy as np

from app.config import VadSettings
from app.engines.bundled import pipecat_file
from app.errors import EngineError

log = logging.getLogger(__name__)

BUNDLED_FILE = "pipecat/audio/vad/data/silero_vad.onnx"

SAMPLE_RATE = 16_000
WINDOW = 512  # new samples per model call: v5 takes exactly this at 16 kHz
CONTEXT = 64  # the previous window's last samples, fed in again before each window
# Hysteresis, as Silero's own get_speech_timestamps: speech from START, unvoiced below END.
START, END = 0.5, 0.35
# How late its "unvoiced" comes. On 39 espeak-ng utterances (3 voices) in 20 ms frames,
# its first unvoiced frame came 0-6 frames after the speech's last frame within 40 dB
# of its loudest (median 3; webrtcvad mode 2: 3-6, median 5). 2 frames is at most that
# in 28 of the 39, and 40 ms too many at worst. In pink noise at 5 dB SNR it comes later
# (~10 frames), so turns there end a little after vad.silence_ms.
HANGOVER_MS = 40


def bundled_model_path() -> str:
    return pipecat_file(BUNDLED_FILE, "Silero VAD", "vad.silero_model_path")


class SileroVad:
    """The shared model; `detector()` gives each call its own state."""

    name = "silero"

    def __init__(self, settings: VadSettings) -> None:
        import onnxruntime

        started = time.perf_counter()
        path = settings.silero_model_path or bundled_model_path()
        options = onnxruntime.SessionOptions()
        # One thread: a window is ~0.1 ms, far too little to share out.
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        try:
            self._session = onnxruntime.InferenceSession(
                path, sess_options=options, providers=["CPUExecutionProvider"]
            )
            self.detector().is_speech(bytes(2 * WINDOW))  # warm up, and check its inputs
        except Exception as exc:  # a missing, damaged or different file
            raise EngineError(f"cannot load the Silero VAD model {path}: {exc}") from exc
        log.info("Silero VAD loaded: %s in %.2fs", path, time.perf_counter() - started)

    def detector(self) -> SileroDetector:
        return SileroDetector(self._session)


class SileroDetector:
    """One stream's state: the model's recurrent state, its context and unused samples."""

    def __init__(self, session: Any) -> None:
        self._session = session
        self._rate = np.array(SAMPLE_RATE, dtype=np.int64)
        self.reset()

    def reset(self) -> None:
        self._state = np.zeros((2, 1, 128), dtype=np.float32)
        self._context = np.zeros(CONTEXT, dtype=np.float32)
        self._pending = np.zeros(0, dtype=np.float32)
        self._speech = False

    def hangover_frames(self, frame_ms: int) -> int:
        return HANGOVER_MS // frame_ms

    def is_speech(self, frame: bytes) -> bool:
        """The answer as of the last whole window: frames are shorter than one, so a
        frame's answer may come from the window that ended in the frame before."""
        samples = np.frombuffer(frame, dtype=np.int16).astype(np.float32) / 32768
        pending = np.concatenate([self._pending, samples])
        used = len(pending) - len(pending) % WINDOW
        for start in range(0, used, WINDOW):
            probability = self._window(pending[start : start + WINDOW])
            if probability >= START:
                self._speech = True
            elif probability < END:
                self._speech = False
        self._pending = pending[used:]
        return self._speech

    def _window(self, window: np.ndarray) -> float:
        audio = np.concatenate([self._context, window])[np.newaxis]
        probability, self._state = self._session.run(
            None, {"input": audio, "state": self._state, "sr": self._rate}
        )
        self._context = audio[0, -CONTEXT:]
        return float(probability.reshape(-1)[0])
