"""Engines are loaded once per process and shared by every slot."""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass

from app.config import Settings
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


async def load_engines(settings: Settings) -> Engines:
    started = time.perf_counter()
    # Sequential on purpose: parallel loads fight over the same cores and the
    # log then tells nothing about which one is slow.
    stt = await asyncio.to_thread(WhisperSTT, settings.stt)
    tts = await asyncio.to_thread(KokoroTTS, settings.tts)
    llm: ChatLLM
    if settings.llm.base_url:
        remote = OpenAICompatLLM(settings.llm)
        try:
            await remote.start()
        except EngineError as exc:
            # vLLM often comes up after us; turns retry the lookup and report errors.
            log.warning("llm not reachable yet: %s", exc)
        llm = remote
    else:
        llm = await asyncio.to_thread(LlamaCppLLM, settings.llm)
    log.info("engines ready in %.2fs", time.perf_counter() - started)
    return Engines(stt=stt, llm=llm, tts=tts)
