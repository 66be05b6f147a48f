"""Engines are loaded once per process and shared by every slot."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from app.config import Settings
from app.engines.cpu_turns import CpuTurns
from app.engines.llama import LlamaCppLLM
from app.engines.llm import ChatLLM, OpenAICompatLLM
from app.engines.stt import SpeechToText, WhisperSTT
from app.engines.tts import KokoroTTS, TextToSpeech
from app.errors import EngineError

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Engines:
    stt: SpeechToText
    llm: ChatLLM
    tts: TextToSpeech

    async def aclose(self) -> None:
        self.stt.close()
        self.tts.close()
        await self.llm.aclose()


async def load_engines(
    settings: Settings, unreachable: Callable[[str, str], None] | None = None
) -> Engines:
    """Whisper, Kokoro and the LLM. An LLM server that cannot be reached yet is told to
    `unreachable` (engine, why) rather than fail the start: vLLM often comes up after us."""
    started = time.perf_counter()
    # Sequential on purpose: parallel loads fight over the same cores and the
    # log then tells nothing about which one is slow.
    stt = await asyncio.to_thread(WhisperSTT, settings.stt)
    turns = CpuTurns()  # Kokoro's and the embedded LLM's, when both run on the CPU
    tts = await asyncio.to_thread(KokoroTTS, settings.tts, turns)
    llm: ChatLLM
    if settings.llm.base_url:
        remote = OpenAICompatLLM(settings.llm)
        try:
            await remote.start()
        except EngineError as exc:
            # Turns retry the lookup and report errors.
            log.warning("llm: %s", exc)
            if unreachable is not None:
                unreachable("llm", str(exc))
        llm = remote
    else:
        on_cpu = settings.tts.provider == "CPUExecutionProvider"
        llm = await asyncio.to_thread(LlamaCppLLM, settings.llm, turns if on_cpu else None)
    log.info("engines ready in %.2fs", time.perf_counter() - started)
    return Engines(stt=stt, llm=llm, tts=tts)
