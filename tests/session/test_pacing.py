"""How the agent paces a reply's pieces: how long each may be, from the audio ahead of
it and how fast pieces are being made, and the LLM and TTS taking turns."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator
from typing import Any

import pytest

from app.agent.chunker import CHARS_PER_WORD, LOOKAHEAD_WORDS
from app.agent.pacing import PACE_HEADROOM, Pace, Playout, Rate
from app.agent.responders import AgentResponder, Piece, SpeechRequest
from app.agent.timings import TurnTimings
from app.engines import Engines
from app.vocab.chat import ChatMessage, Delta
from app.vocab.speech import Speech
from tests.session.fakes import FakeLLM, FakeSTT, FakeTTS


def test_until_both_rates_are_known_the_chunker_s_growth_decides() -> None:
    pace = Pace()
    assert pace.limit_chars(2.0) is None
    pace.saying.add(0.6, 30)
    assert pace.limit_chars(2.0) is None
    pace.writing.add(0.04, 4)
    assert pace.limit_chars(2.0) is not None


def test_the_next_piece_says_what_can_be_made_before_the_audio_ahead_has_played() -> None:
    pace = Pace()
    pace.writing.add(0.04, 4)  # 10 ms to write a character
    pace.saying.add(0.6, 30)  # 20 ms to say one: two busy cores
    # The words read past a limit are written before the piece is cut.
    past_s = 0.01 * LOOKAHEAD_WORDS * CHARS_PER_WORD
    assert pace.limit_chars(1.5) == pytest.approx((PACE_HEADROOM * 1.5 - past_s) / 0.03)
    assert pace.limit_chars(0.0) == 0.0
    # 2 s to say 100 characters: late after 1.5 s of audio; 10 characters are not.
    assert pace.late(100, 1.5) and not pace.late(10, 1.5)
    assert not Pace().late(100, 0.0), "nothing known: not late"
    fast = Pace()  # a GPU
    fast.writing.add(0.004, 4)
    fast.saying.add(0.06, 30)
    assert fast.limit_chars(1.5) == pytest.approx((PACE_HEADROOM * 1.5 - past_s / 10) / 0.003)


def test_a_rate_follows_the_load_without_jumping_on_one_piece() -> None:
    rate = Rate()
    assert rate.per_unit is None
    rate.add(0.6, 30)
    assert rate.per_unit == pytest.approx(0.02)
    rate.add(2.4, 30)  # one piece made while other sessions held the engines
    assert 0.02 < rate.per_unit < 0.05  # type: ignore[operator]
    for _ in range(40):
        rate.add(2.4, 30)
    assert rate.per_unit == pytest.approx(0.08, rel=0.01)
    rate.add(1.0, 0)  # nothing said: nothing learnt
    assert rate.per_unit == pytest.approx(0.08, rel=0.01)


def test_the_audio_ahead_is_what_is_made_and_not_yet_played() -> None:
    playout = Playout()
    assert playout.ahead(10.0) == 0.0
    playout.add(1.0, now=10.0)
    playout.add(2.0, now=10.5)  # plays after the first
    assert playout.ahead(10.5) == pytest.approx(2.5)
    assert playout.ahead(14.0) == 0.0
    playout.add(1.0, now=14.0)  # after a hole it plays as it comes
    assert playout.ahead(14.5) == pytest.approx(0.5)


async def spoken_pieces(responder: AgentResponder, text: str) -> list[str]:
    """The reply's pieces, each once (a piece's later parts say no text of their own)."""
    request = SpeechRequest(
        "sess_test", [{"role": "user", "content": "Go on."}], b"", "test", 1.0, TurnTimings()
    )
    pieces = []
    async with contextlib.aclosing(responder.speak(request)) as spoken:
        async for piece in spoken:
            assert isinstance(piece, Piece)
            pieces += [piece.text] if piece.text else []
    assert " ".join(pieces) == text
    return pieces


@pytest.mark.parametrize("seconds_per_word", [0.001, 2.0])
async def test_the_agent_sizes_each_piece_by_the_audio_ahead_of_it(
    seconds_per_word: float,
) -> None:
    """With little audio ahead (a voice that makes a millisecond of audio a word), each
    later piece is as short as a piece may be; with much (two seconds a word), as long
    as a piece ever is. The first reply teaches the responder how fast pieces are made."""
    words = [f"word{n}" for n in range(60)]
    text = "Sure, " + " ".join(words) + "."
    tts = FakeTTS()
    tts.seconds_per_word = seconds_per_word
    llm = FakeLLM()
    llm.answer = text
    llm.delay_s = 0.001
    responder = AgentResponder(Engines(stt=FakeSTT(), llm=llm, tts=tts))
    await spoken_pieces(responder, text)
    later = [len(piece.split()) for piece in (await spoken_pieces(responder, text))[1:-1]]
    if seconds_per_word < 0.01:
        assert max(later) <= 6, later  # 16 characters said, and three words to a boundary
    else:
        assert min(later) == 18, later  # the most words a piece may have


class PartsTTS(FakeTTS):
    """A voice that can make a piece in parts: notes which, and the audio ahead of each."""

    def __init__(self) -> None:
        super().__init__()
        self.in_parts: list[tuple[str, float]] = []

    async def synthesize_parts(
        self,
        text: str,
        *,
        voice: str | None = None,
        speed: float | None = None,
        language: str = "",
        ahead_s: float = 0.0,
    ) -> AsyncGenerator[Speech]:
        self.in_parts.append((text, ahead_s))
        whole = await self.synthesize(text, voice=voice, speed=speed, language=language)
        half = len(whole.samples) // 2
        yield Speech(whole.samples[:half], whole.rate)
        yield Speech(whole.samples[half:], whole.rate)


@pytest.mark.parametrize("slow", [True, False])
async def test_the_piece_after_the_first_is_made_in_parts_when_it_would_come_late(
    slow: bool,
) -> None:
    """The first piece is made in parts; on a voice slower than the audio it makes, the
    next would leave a hole, so it is made in parts too, and told how much audio is
    ahead of it. Not the one after: a piece in parts is made while its first part plays,
    which leaves the next less time, and each late piece in parts made the next late.
    On a fast voice the next is made whole."""
    text = "Sure, the first words are these. And then the next ones come. And the last."
    tts = PartsTTS()
    tts.delay_s, tts.seconds_per_word = (0.1, 0.005) if slow else (0.001, 1.0)
    llm = FakeLLM()
    llm.answer = text
    llm.delay_s = 0.001
    responder = AgentResponder(Engines(stt=FakeSTT(), llm=llm, tts=tts))
    clauses = await spoken_pieces(responder, text)
    assert len(clauses) >= 3, clauses
    in_parts = [said for said, _ in tts.in_parts]
    assert in_parts == (clauses[:2] if slow else clauses[:1])
    assert tts.in_parts[0][1] == 0.0, "nothing plays before the first"
    if slow:
        assert 0.0 <= tts.in_parts[1][1] < 0.05


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
