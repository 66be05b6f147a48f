"""Small engine doubles and helpers for tests about orchestration.

The real engines are exercised end to end in tests/e2e and tests/engines.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Callable
from typing import Any

import numpy as np

from app.config import Settings, VadSettings
from app.engines import Engines
from app.engines.llm import ChatMessage
from app.engines.tts import Speech
from app.errors import EngineError
from app.session.session import Session

RNG = np.random.default_rng(3)


def noise(ms: int) -> bytes:
    return np.clip(RNG.normal(0, 3000, 16 * ms), -32768, 32767).astype(np.int16).tobytes()


def silence(ms: int) -> bytes:
    return bytes(32 * ms)


class FakeSTT:
    def __init__(self) -> None:
        self.heard: list[int] = []

    async def transcribe(self, pcm16k: bytes) -> str:
        self.heard.append(len(pcm16k))
        await asyncio.sleep(0.01)
        return f"question of {len(pcm16k) // 32} ms"

    def close(self) -> None: ...


class FakeLLM:
    model_name = "fake"

    def __init__(self) -> None:
        self.prompts: list[list[ChatMessage]] = []
        self.closed_early = 0

    async def stream(self, messages: list[ChatMessage]) -> AsyncGenerator[str, None]:
        self.prompts.append(messages)
        finished = False
        try:
            for word in ["Sure,", "here", "is", "the", "answer", "you", "asked", "for."]:
                await asyncio.sleep(0.02)
                yield word + " "
            finished = True
        finally:
            if not finished:
                self.closed_early += 1

    async def aclose(self) -> None: ...


class FakeTTS:
    voices = ["test"]

    def __init__(self) -> None:
        self.refuse: set[str] = set()  # texts it fails on, like an unspeakable symbol

    async def synthesize(
        self, text: str, *, voice: str | None = None, urgent: bool = False
    ) -> Speech:
        await asyncio.sleep(0.01)
        if text in self.refuse or "*" in self.refuse:
            raise EngineError(f"cannot speak {text!r}")
        return Speech(np.full(2400, 0.1, dtype=np.float32), 24_000)

    def close(self) -> None: ...


class FakeAudio:
    rate = 16_000

    def __init__(self) -> None:
        self.writes: list[int] = []

    async def write(
        self, pcm: bytes, on_start: Callable[[], None] | None = None, *, session_id: str = ""
    ) -> None:
        assert session_id == "sess_test"
        self.writes.append(len(pcm))
        if on_start is not None:
            on_start()

    def clear(self) -> int:
        return 0


def make_session(
    speculative_ms: int = 200,
) -> tuple[Session, list[dict[str, Any]], FakeAudio, Engines]:
    settings = Settings(vad=VadSettings(silence_ms=500, speculative_ms=speculative_ms))
    engines = Engines(stt=FakeSTT(), llm=FakeLLM(), tts=FakeTTS())
    sent: list[dict[str, Any]] = []
    audio = FakeAudio()
    session = Session("sess_test", settings, engines, audio, sent.append)
    session.start()
    return session, sent, audio, engines


def kinds(sent: list[dict[str, Any]]) -> list[str]:
    return [event["type"] for event in sent]


async def wait_for(sent: list[dict[str, Any]], kind: str, timeout_s: float = 2.0) -> None:
    for _ in range(int(timeout_s / 0.01)):
        if kind in kinds(sent):
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"no {kind}; got {kinds(sent)}")
