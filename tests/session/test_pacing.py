"""How the agent paces a reply's pieces: how much longer each may be than the one
before, from how fast TTS has been making audio, and the LLM and TTS taking turns."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator
from typing import Any

import pytest

from app.agent.responders import (
    MIN_GROWTH,
    PACE_HEADROOM,
    AgentResponder,
    Piece,
    SpeechRequest,
    SynthesisPace,
)
from app.agent.timings import TurnTimings
from app.engines import Engines
from app.vocab.chat import ChatMessage, Delta
from app.vocab.speech import Speech
from tests.session.fakes import FakeLLM, FakeSTT, FakeTTS


def test_before_any_piece_pieces_double() -> None:
    assert SynthesisPace().growth == 2.0


def test_fast_synthesis_lets_pieces_grow_and_slow_synthesis_keeps_them_short() -> None:
    fast = SynthesisPace()
    fast.add(0.1, 2.0)  # 20x faster than it plays: a GPU
    assert fast.growth == pytest.approx(PACE_HEADROOM / 0.05)
    slow = SynthesisPace()
    slow.add(1.3, 2.2)  # Kokoro on two busy cores
    assert slow.growth == MIN_GROWTH


def test_the_pace_follows_the_load_without_jumping_on_one_piece() -> None:
    pace = SynthesisPace()
    pace.add(0.2, 2.0)
    alone = pace.growth
    pace.add(1.6, 2.0)  # one piece made while other sessions held the engine
    assert MIN_GROWTH < pace.growth < alone
    for _ in range(20):
        pace.add(1.6, 2.0)
    assert pace.growth == MIN_GROWTH
    pace.add(1.0, 0.0)  # nothing spoken: nothing learnt
    assert pace.growth == MIN_GROWTH


class BusyTTS(FakeTTS):
    """Says when it is synthesizing, and takes a while."""

    def __init__(self) -> None:
        super().__init__()
        self.busy = False

    async def synthesize(self, text: str, **options: Any) -> Speech:
        self.busy = True
        try:
            await asyncio.sleep(0.05)
            return await super().synthesize(text, **options)
        finally:
            self.busy = False


class WatchedLLM(FakeLLM):
    """Notes, for each word it hands over, whether TTS was at work then."""

    def __init__(self, tts: BusyTTS) -> None:
        super().__init__()
        self.echo_question = True  # a long reply: several clauses
        self.delay_s = 0.0
        self._tts = tts
        self.read_while_synthesizing: list[bool] = []

    async def stream(self, messages: list[ChatMessage], **options: Any) -> AsyncGenerator[Delta]:
        async for delta in super().stream(messages, **options):
            self.read_while_synthesizing.append(self._tts.busy)
            yield delta


async def test_the_llm_waits_while_each_clause_is_synthesized() -> None:
    """On shared cores the LLM running beside Kokoro slows both: they take turns."""
    tts = BusyTTS()
    llm = WatchedLLM(tts)
    responder = AgentResponder(Engines(stt=FakeSTT(), llm=llm, tts=tts), first_chunk_words=2)
    question = "what is the weather like in the mountains this week"
    request = SpeechRequest(
        "sess_test", [{"role": "user", "content": question}], b"", "test", 1.0, TurnTimings()
    )
    pieces = []
    async with contextlib.aclosing(responder.speak(request)) as spoken:
        async for piece in spoken:
            assert isinstance(piece, Piece)
            pieces.append(piece.text)
    assert len(pieces) >= 3, pieces
    assert " ".join(pieces).startswith("About what is the weather")
    assert len(llm.read_while_synthesizing) > 10
    assert not any(llm.read_while_synthesizing), "a word was read while TTS worked"
