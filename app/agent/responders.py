"""What the agent says back: the voice agent (Whisper -> LLM -> Kokoro) or an echo.

A responder holds no session state, so one serves every session; the session
decides when its words become visible and where its audio goes.

The agent's LLM streams into a small clause channel while TTS works through
it, so the first clause is spoken while the rest is still being generated,
and clause k+1 is synthesized while clause k plays.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncGenerator
from dataclasses import dataclass
from typing import Protocol

from app.agent.chunker import ClauseChunker
from app.agent.pacing import Pace, Playout
from app.agent.reckoning import with_workings
from app.agent.reply_rules import reply_rules
from app.agent.spoken_form import SpokenForm, said_length
from app.agent.timings import TurnTimings
from app.engines import Engines
from app.engines.gate import Gate
from app.engines.tts import StreamingTextToSpeech
from app.errors import EngineError
from app.streams import Channel
from app.tasks import cancel_task
from app.vocab.chat import ChatMessage, Delta, TokenCount, Tool, ToolCallDelta, ToolChoice
from app.vocab.languages import ENGLISH
from app.vocab.persona import filled
from app.vocab.speech import BriefLook, Speech, Transcript

log = logging.getLogger(__name__)

# Clauses generated but not yet synthesized. After the first clause the LLM runs
# to the end of its reply, so the embedded model is free for other sessions
# soon; a reply of llm.max_tokens cannot fill this, and if one did, reading
# the LLM would pause (backpressure) rather than buffer.
CLAUSE_QUEUE_SIZE = 64


@dataclass(frozen=True, slots=True)
class SpeechRequest:
    """What to answer: the prompt (the agent) or the user's own audio (the echo)."""

    session_id: str
    prompt: list[ChatMessage]
    heard: bytes  # 16 kHz mono s16
    voice: str
    speed: float
    timings: TurnTimings
    max_tokens: int | None = None  # None: the server's llm.max_tokens
    tools: list[Tool] | None = None
    tool_choice: ToolChoice | None = None
    reply_id: str | None = None  # logged with the LLM request, to find it in the server's log
    tokens: TokenCount | None = None  # where the LLM adds the tokens this reply used
    language: str = ""  # what the reply is spoken in (a Whisper code); empty: tts.lang's


@dataclass(frozen=True, slots=True)
class Piece:
    """A piece of a reply: its audio, and the words it says (empty for the echo)."""

    text: str
    speech: Speech


class Responder(Protocol):
    voices: tuple[str, ...]  # what a session's voice may be; empty: anything
    languages: frozenset[str]  # what a session's user may speak; empty: anything
    answers_text: bool  # can reply to typed messages, and write replies, not only speak

    async def transcribe(
        self,
        pcm16k: bytes,
        *,
        logprobs: bool = False,
        brief: BriefLook | None = None,
        language: str | None = None,
    ) -> Transcript | None:
        """The user's words; None from a responder that does not listen for words.
        `brief`: speech to judge at once (a backchannel? the words so far?), sooner and
        less surely heard than a turn. `language`: a Whisper code, or "auto" (None: the
        server's)."""
        ...

    def speak(self, request: SpeechRequest) -> AsyncGenerator[Piece | ToolCallDelta, None]:
        """The reply as speech, piece by piece, and the tools it calls."""
        ...

    def write(self, request: SpeechRequest) -> AsyncGenerator[Delta, None]:
        """The reply as text, delta by delta, with no audio, and the tools it calls."""
        ...

    async def say(self, text: str, voice: str, speed: float, language: str = "") -> Speech | None:
        """`text` spoken, as is; None from a responder with no voice of its own."""
        ...

    def reads_while_listening(self) -> bool:
        """Whether the LLM would read the user's words so far now: it runs in this process,
        and no engine is working (what it reads would wait, or make other work wait)."""
        ...

    async def read_ahead(self, prompt: list[ChatMessage], *, unfinished: bool = False) -> None:
        """The start of the next reply's prompt, for the LLM to read while it is idle;
        `unfinished`: its last message is the user's words so far."""
        ...


class AgentResponder:
    def __init__(
        self,
        engines: Engines,
        *,
        first_chunk_words: int = 4,
        max_spoken_words: int = 0,
        work_out: bool = True,
        read_while_listening: bool = True,
    ) -> None:
        """`read_while_listening`: llm.read_while_listening."""
        self._stt = engines.stt
        self._llm = engines.llm
        self._tts = engines.tts
        self._first_chunk_words = first_chunk_words
        self._max_spoken_words = max_spoken_words
        self._work_out = work_out
        self._read_while_listening = read_while_listening
        self._pace = Pace()
        self.voices = tuple(engines.tts.voices)
        self.languages = engines.stt.languages
        self.answers_text = True

    async def transcribe(
        self,
        pcm16k: bytes,
        *,
        logprobs: bool = False,
        brief: BriefLook | None = None,
        language: str | None = None,
    ) -> Transcript | None:
        return await self._stt.transcribe(pcm16k, logprobs=logprobs, brief=brief, language=language)

    async def say(self, text: str, voice: str, speed: float, language: str = "") -> Speech | None:
        return await self._tts.synthesize(
            text, voice=voice, speed=speed, urgent=True, language=language
        )

    def reads_while_listening(self) -> bool:
        return self._read_while_listening and self._llm.reads_ahead and Gate.all_idle()

    async def read_ahead(self, prompt: list[ChatMessage], *, unfinished: bool = False) -> None:
        told = as_told(prompt, model=self._llm.model_name, tools=False)
        await self._llm.read_ahead(told, unfinished=unfinished)

    async def write(self, request: SpeechRequest) -> AsyncGenerator[Delta, None]:
        async with contextlib.aclosing(self._stream(request)) as deltas:
            async for delta in deltas:
                request.timings.mark("llm_first_token")
                yield delta

    def _stream(self, request: SpeechRequest) -> AsyncGenerator[Delta, None]:
        """The LLM's reply, never babbling (a response that sets its own length keeps
        it), and never, without a tool, promising to act."""
        # A reply to a tool's result is told it acts even where it may not call again.
        acts = bool(request.tools) and (
            request.tool_choice != "none" or _answers_a_call(request.prompt)
        )
        told = as_told(request.prompt, model=self._llm.model_name, tools=acts)
        deltas = self._llm.stream(
            with_workings(told, request.language) if self._work_out else told,
            max_tokens=request.max_tokens,
            tools=request.tools,
            tool_choice=request.tool_choice,
            for_reply=request.reply_id,
            tokens=request.tokens,
        )
        if request.tool_choice == "none":
            deltas = _words_only(deltas, request.session_id)
        said, _ = reply_rules(
            deltas,
            request.prompt,
            language=request.language,
            acts=acts,
            soft_words=self._max_spoken_words,
            own_length=request.max_tokens is not None,
        )
        return said

    async def speak(self, request: SpeechRequest) -> AsyncGenerator[Piece | ToolCallDelta, None]:
        """Each clause as soon as it is synthesized, tool calls as they come. A clause
        Kokoro cannot speak (a stray symbol) is skipped; a reply none of which could
        be spoken, and that calls no tool, fails."""
        clauses: Channel[str | ToolCallDelta] = Channel(CLAUSE_QUEUE_SIZE)
        made = Progress()
        chunker = self._chunker(request.language)
        # Awaited below, which surfaces its errors: not a fire-and-forget spawn().
        producer = asyncio.create_task(
            self._generate(request, chunker, clauses, made), name=f"{request.session_id}:llm"
        )
        playout = Playout()
        spoken = 0
        unspoken: list[str] = []
        try:
            async for clause in clauses:
                if isinstance(clause, ToolCallDelta):
                    spoken += 1
                    yield clause
                    continue
                heard_s = work_s = 0.0
                parts_made = 0
                mark = time.perf_counter()
                ahead_s = playout.ahead(mark)
                try:
                    async with contextlib.aclosing(
                        self._voiced(clause, request, spoken, ahead_s)
                    ) as parts:
                        async for speech in parts:
                            parts_made += 1
                            now = time.perf_counter()
                            work_s += now - mark  # not the time the listener took it
                            playout.add(speech.duration_s, now)
                            request.timings.mark("tts_first_audio")
                            # A part after the first says more of the same clause.
                            yield Piece("" if heard_s else clause, speech)
                            heard_s += speech.duration_s
                            mark = time.perf_counter()
                except EngineError as exc:
                    unspoken.append(str(exc))
                    log.warning(
                        "skipped %s: %s",
                        "the rest of a clause" if heard_s else "a clause",
                        exc,
                        extra={"session_id": request.session_id},
                    )
                    if not heard_s:
                        continue
                finally:
                    # A piece in parts is decoded twice (kokoro_stream): it says too
                    # much of the others, but something where nothing is known yet.
                    if heard_s and (parts_made == 1 or self._pace.saying.per_unit is None):
                        self._pace.saying.add(work_s, len(clause))
                    # Set before the LLM goes on to write the next piece.
                    ahead_s = playout.ahead(time.perf_counter())
                    chunker.limit_chars = self._pace.limit_chars(ahead_s)
                    made.one_done()
                log.debug(
                    "tts %.0f ms for %.2f s: %r; %.2f s ahead, the next piece at most %s "
                    "characters",
                    work_s * 1000,
                    heard_s,
                    clause,
                    ahead_s,
                    "?" if chunker.limit_chars is None else f"{chunker.limit_chars:.0f}",
                    extra={"session_id": request.session_id},
                )
                spoken += 1
            await producer  # re-raise what ended the generation, if anything
            if unspoken and not spoken:
                raise EngineError(
                    f"nothing of the reply could be spoken: {unspoken[0]}", code="tts_failed"
                )
        finally:
            await cancel_task(producer)

    def _chunker(self, language: str) -> ClauseChunker:
        return ClauseChunker(
            first_max_words=self._first_chunk_words,
            phrases=(language or ENGLISH) == ENGLISH,
            measure=lambda text: said_length(text, language),
        )

    async def _voiced(
        self, clause: str, request: SpeechRequest, before: int, ahead_s: float
    ) -> AsyncGenerator[Speech, None]:
        """`clause` spoken, after `before` others, with `ahead_s` seconds of the reply
        still to play. A reply's first piece, and the next if it would not be made
        before those have played, in parts where the voice can stream them: the first
        part heard sooner (app/engines/kokoro_stream.py).

        Only the next: the first is decoded twice, so on a slow CPU little of it is left
        to play when it is made. A piece in parts is made while its own first part
        plays, which leaves the one after it less time: every late piece in parts made
        the next late too (2 vCPU AMD EPYC: joins of 0.4-1.1 s one after another)."""
        voice, speed, language = request.voice, request.speed, request.language
        first = before == 0
        streams = first or (before == 1 and self._pace.late(len(clause), ahead_s))
        tts = self._tts
        if isinstance(tts, StreamingTextToSpeech) and streams:
            parts = tts.synthesize_parts(
                clause, voice=voice, speed=speed, language=language, ahead_s=ahead_s
            )
            async with contextlib.aclosing(parts):
                async for speech in parts:
                    yield speech
            return
        yield await self._tts.synthesize(
            clause, voice=voice, speed=speed, urgent=first, language=language
        )

    async def _generate(
        self,
        request: SpeechRequest,
        chunker: ClauseChunker,
        clauses: Channel[str | ToolCallDelta],
        made: Progress,
    ) -> None:
        """Stream the reply into clauses, each as it is said (spoken_form); pause while
        each one is synthesized.

        On a shared CPU the LLM running alongside a synthesis nearly doubles its time:
        for the first clause that is the wait for the first audio, for the next ones a
        reply that stops mid-sentence (a 2.2 s clause took 2.0 s instead of 1.2 s).
        Taking turns costs nothing the listener hears: the next clause's words come in a
        fraction of the time the clause before takes to play. The pause blocks the
        embedded worker (or, for vLLM, the stream through TCP) for just that long.
        """
        timings = request.timings
        said = SpokenForm(request.language)
        begun = False
        try:
            async with contextlib.aclosing(self._stream(request)) as deltas:
                asked = time.perf_counter()
                async for delta in deltas:
                    timings.mark("llm_first_token")
                    if isinstance(delta, ToolCallDelta):
                        await clauses.put(delta)
                        continue
                    # The first delta's wait is the prompt's reading, not the writing.
                    if begun:
                        self._pace.writing.add(time.perf_counter() - asked, len(delta))
                    begun = True
                    for clause in filter(None, map(said, chunker.push(delta))):
                        timings.mark("first_clause")
                        made.one_given()
                        await clauses.put(clause)
                    await made.all_done()
                    asked = time.perf_counter()
            for clause in filter(None, [*map(said.last, chunker.flush()), said.end()]):
                timings.mark("first_clause")
                made.one_given()
                await clauses.put(clause)
        finally:
            clauses.close()


class Progress:
    """Clauses given to TTS and clauses it has finished (spoken or skipped)."""

    def __init__(self) -> None:
        self._given = self._done = 0
        self._caught_up = asyncio.Event()
        self._caught_up.set()

    def one_given(self) -> None:
        self._given += 1
        self._caught_up.clear()

    def one_done(self) -> None:
        self._done += 1
        if self._done >= self._given:
            self._caught_up.set()

    async def all_done(self) -> None:
        await self._caught_up.wait()


async def _words_only(
    deltas: AsyncGenerator[Delta, None], session_id: str
) -> AsyncGenerator[Delta, None]:
    """A reply told to call nothing (tool_choice "none", as the last round of a server's
    calls is): a call an LLM server makes anyway is not followed, where it would be shown
    and never run."""
    async with contextlib.aclosing(deltas):
        async for delta in deltas:
            if not isinstance(delta, ToolCallDelta):
                yield delta
            elif delta.name:
                log.warning("the LLM called %s when told to call nothing; not followed",
                            delta.name, extra={"session_id": session_id})  # fmt: skip


def as_told(prompt: list[ChatMessage], *, model: str, tools: bool) -> list[ChatMessage]:
    """`prompt` with its system message filled in (the instructions come first)."""
    if not prompt or prompt[0]["role"] != "system" or not prompt[0]["content"]:
        return prompt
    told = filled(prompt[0]["content"], model=model, tools=tools)
    return [{**prompt[0], "content": told}, *prompt[1:]]


def _answers_a_call(prompt: list[ChatMessage]) -> bool:
    """A tool's result came after the user last spoke."""
    for message in reversed(prompt):
        if message["role"] == "tool":
            return True
        if message["role"] == "user":
            return False
    return False
