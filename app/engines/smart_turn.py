"""Is the user's turn over? Smart Turn v3.2, one ONNX model per process, shared by every slot.

It listens to how an utterance ends (intonation, a trailing "and", "um"), not
only to whether there is silence, and gives the probability that the turn is
complete. The model ships in the pipecat-ai wheel, so it works offline.
"""

from __future__ import annotations

import logging
import time

import numpy as np

from app.audio.log_mel import smart_turn_features
from app.config import TurnSettings
from app.engines.bundled import pipecat_file
from app.engines.gate import Gate
from app.errors import EngineError

log = logging.getLogger(__name__)

BUNDLED_FILE = "pipecat/audio/turn/smart_turn/data/smart-turn-v3.2-cpu.onnx"


def bundled_model_path() -> str:
    return pipecat_file(BUNDLED_FILE, "Smart Turn", "turn.model_path")


class SmartTurn:
    def __init__(self, settings: TurnSettings) -> None:
        import onnxruntime

        started = time.perf_counter()
        path = settings.model_path or bundled_model_path()
        options = onnxruntime.SessionOptions()
        # One thread: a call is ~10-100 ms, and it must not take the cores TTS is using.
        options.intra_op_num_threads = settings.threads
        options.inter_op_num_threads = 1
        try:
            self._session = onnxruntime.InferenceSession(
                path, sess_options=options, providers=["CPUExecutionProvider"]
            )
        except Exception as exc:  # a missing or damaged file
            raise EngineError(f"cannot load the turn model {path}: {exc}") from exc
        self._gate = Gate("turn", 1)
        self._predict(bytes(32_000))  # warm up
        log.info("turn model loaded: %s in %.2fs", path, time.perf_counter() - started)

    async def complete(self, pcm16k: bytes) -> float:
        # Someone is waiting in silence for this: it goes before anything queued.
        return await self._gate.run(self._predict, pcm16k, priority=0)

    def _predict(self, pcm16k: bytes) -> float:
        features = smart_turn_features(pcm16k)[np.newaxis]
        (probability,) = self._session.run(None, {"input_features": features})
        return float(np.asarray(probability).reshape(-1)[0])

    def close(self) -> None:
        self._gate.close()
