"""One user turn and the agent's spoken reply: STT -> LLM -> clauses -> TTS -> track.

The LLM streams into a small clause queue while TTS works through it, so the
first clause is spoken while the rest is still being generated, and clause k+1
is synthesized while clause k plays (the track buffers ahead of playout).

A reply may start before the user's turn has ended (speculation, see
`vad.speculative_ms`): transcription, generation and the first synthesis run,
but nothing is sent, played or written to history until `UserTurn.ended` is
set. If the user goes on talking instead, the reply's task is cancelled.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from app import events
from app.audio.chunker import ClauseChunker
from app.audio.resample import Resampler
from app.engines.llm import ChatLLM, ChatMessage
from app.engines.stt import SpeechToText
from app.engines.tts import TextToSpeech
from app.errors import EngineError
from app.session.context import TurnContext
from app.session.history import Message
from app.session.reply import Reply
from app.session.timings import TurnTimings
from app.tasks import cancel_task

log = logging.getLogger(__name__)

# Clauses generated but not yet synthesized. After the first clause the LLM runs
# to the end of its reply, so the embedded model is free for other sessions
# soon; a reply of llm.max_tokens cannot fill this, and if one did, reading
# the LLM would pause (backpressure) rather than buffer.
CLAUSE_QUEUE_SIZE = 64


@dataclass(slots=True, eq=False)
class UserTurn:
    """What the user said (16 kHz mono s16), waiting for or getting its reply."""

    session_id: str
    audio: bytes
    item_id: str
    timings: TurnTimings
    ended: asyncio.Event = field(default_factory=asyncio.Event)
    abandoned: bool = False
    task: asyncio.Task[None] | None = None
    respond: bool = True  # answer it; False: transcribe and keep it only (create_response)

    @classmethod
    def finished(
        cls, session_id: str, audio: bytes, item_id: str, *, respond: bool = True
    ) -> UserTurn:
        turn = cls(session_id, audio, item_id, TurnTimings(), respond=respond)
        turn.ended.set()
        return turn

    @classmethod
    def speculative(cls, session_id: str, audio: bytes, item_id: str) -> UserTurn:
        return cls(session_id, audio, item_id, TurnTimings(ended=False))

    def confirm(self) -> None:
        self.timings.end_of_turn()
        self.ended.set()


@dataclass(slots=True, eq=False)
class ReplyRequest:
    """response.create: answer from the conversation as it stands."""

    session_id: str
    instructions: str | None = None  # replaces the session's for this response
    abandoned: bool = False
    task: asyncio.Task[None] | None = None


Job = UserTurn | ReplyRequest


class Responder(Protocol):
    async def respond(self, turn: UserTurn) -> None: ...

    async def reply(self, request: ReplyRequest) -> None: ...


class _Commit:
    """The point where a (possibly speculative) reply becomes visible, run once."""

    def __init__(self, ended: asyncio.Event, then: Callable[[], None]) -> None:
        self._ended = ended
        self._then: Callable[[], None] | None = then

    async def __call__(self) -> None:
        await self._ended.wait()
        if self._then is not None:
            then, self._then = self._then, None
            then()


class AgentResponder:
    def __init__(
        self,
        ctx: TurnContext,
        stt: SpeechToText,
        llm: ChatLLM,
        tts: TextToSpeech,
        *,
        first_chunk_words: int = 4,
    ) -> None:
        self._ctx = ctx
        self._first_chunk_words = first_chunk_words
        self._stt = stt
        self._llm = llm
        self._tts = tts

    async def respond(self, turn: UserTurn) -> None:
        ctx = self._ctx
        transcript = await self._stt.transcribe(turn.audio)
        turn.timings.mark("stt_done")
        seconds = len(turn.audio) / 32_000

        def heard() -> None:
            if ctx.options.transcription:
                ctx.send(events.transcription_completed(turn.item_id, transcript, seconds))
            ctx.send(events.item_done(events.user_item(turn.item_id, transcript=transcript)))
            if transcript:
                ctx.history.add(Message("user", transcript, turn.item_id))

        if not transcript or not turn.respond:
            await _Commit(turn.ended, heard)()
            if not transcript:
                log.info("empty transcript; no reply", extra={"session_id": ctx.session_id})
            return
        prompt: list[ChatMessage] = [
            *ctx.history.prompt(),
            {"role": "user", "content": transcript},
        ]
        await self.speak(prompt, turn.timings, turn.ended, heard)

    async def reply(self, request: ReplyRequest) -> None:
        ended = asyncio.Event()
        ended.set()
        await self.speak(self._ctx.history.prompt(request.instructions), TurnTimings(), ended)

    async def speak(
        self,
        prompt: list[ChatMessage],
        timings: TurnTimings,
        ended: asyncio.Event,
        commit_user: Callable[[], None] = lambda: None,
    ) -> None:
        ctx = self._ctx
        reply = Reply(ctx, timings)

        def created() -> None:
            commit_user()
            reply.open()

        # Everything visible waits for this: the user's turn must really be over.
        # Watched from the start, so response.created goes out as soon as it is.
        open_response = _Commit(ended, created)
        opening = asyncio.create_task(open_response(), name=f"{ctx.session_id}:open")
        clauses: asyncio.Queue[str | None] = asyncio.Queue(maxsize=CLAUSE_QUEUE_SIZE)
        first_synthesized = asyncio.Event()
        # Awaited below, which surfaces its errors: not a fire-and-forget spawn().
        producer = asyncio.create_task(
            self._generate(prompt, clauses, first_synthesized, timings),
            name=f"{ctx.session_id}:llm",
        )
        # One resampler per reply: stateful across its clauses, flushed at the end.
        resampler = Resampler(ctx.audio.rate)
        unspoken: list[str] = []
        failure: str | None = None
        try:
            while (clause := await clauses.get()) is not None:
                started = time.perf_counter()
                try:
                    speech = await self._tts.synthesize(
                        clause,
                        voice=ctx.options.voice,
                        speed=ctx.options.speed,
                        urgent=not reply.text,
                    )
                except EngineError as exc:
                    # One unspeakable piece (a stray symbol) must not silence the reply.
                    unspoken.append(str(exc))
                    log.warning("skipped a clause: %s", exc, extra={"session_id": ctx.session_id})
                    continue
                finally:
                    first_synthesized.set()
                log.debug(
                    "tts %.0f ms for %.2f s: %r",
                    (time.perf_counter() - started) * 1000,
                    speech.duration_s,
                    clause,
                    extra={"session_id": ctx.session_id},
                )
                timings.mark("tts_first_audio")
                await open_response()
                await reply.play(resampler.pcm(speech.samples, speech.rate), clause)
            await open_response()
            await reply.play(resampler.flush())
            await producer  # re-raise what ended the generation, if anything
            if unspoken and not reply.text:
                raise EngineError(f"nothing of the reply could be spoken: {unspoken[0]}")
        except EngineError as exc:
            await open_response()
            log.error("reply failed: %s", exc, extra={"session_id": ctx.session_id})
            ctx.send(events.error(str(exc), type_="server_error", code="engine_error"))
            failure = str(exc)
        except asyncio.CancelledError:
            reply.interrupt("client_cancelled")  # a no-op if that is what cancelled us
            raise
        except Exception as exc:  # a bug or an engine failing oddly: still end the reply
            log.exception("reply crashed", extra={"session_id": ctx.session_id})
            await open_response()
            ctx.send(events.error("internal error", type_="server_error", code="internal"))
            failure = f"internal error: {type(exc).__name__}"
        finally:
            # Both cancelled before either is awaited: a second cancellation
            # arriving mid-cleanup must not leave one of them running.
            producer.cancel()
            opening.cancel()
            await cancel_task(producer)
            await cancel_task(opening)
        await reply.finish_playing(failure)

    async def _generate(
        self,
        prompt: list[ChatMessage],
        clauses: asyncio.Queue[str | None],
        first_synthesized: asyncio.Event,
        timings: TurnTimings,
    ) -> None:
        """Stream the reply into clauses; pause while the first one is synthesized.

        On a shared CPU the LLM running alongside the first synthesis nearly
        doubles the time to the first audio; the pause blocks the embedded
        worker (or, for vLLM, the stream through TCP) for just that long.
        """
        chunker = ClauseChunker(first_max_words=self._first_chunk_words)
        try:
            async with contextlib.aclosing(self._llm.stream(prompt)) as deltas:
                async for delta in deltas:
                    timings.mark("llm_first_token")
                    for clause in chunker.push(delta):
                        timings.mark("first_clause")
                        await clauses.put(clause)
                    if timings.has("first_clause"):
                        await first_synthesized.wait()
            for clause in chunker.flush():
                timings.mark("first_clause")
                await clauses.put(clause)
        finally:
            # The consumer stops on None; when we are cancelled it is already gone.
            task = asyncio.current_task()
            if task is None or not task.cancelling():
                await clauses.put(None)


class EchoResponder:
    """Plays each utterance back: a media-path check with no models."""

    def __init__(self, ctx: TurnContext) -> None:
        self._ctx = ctx

    async def respond(self, turn: UserTurn) -> None:
        await turn.ended.wait()
        reply = Reply(self._ctx, turn.timings)
        reply.open()
        resampler = Resampler(self._ctx.audio.rate)
        samples = np.frombuffer(turn.audio, dtype=np.int16)
        try:
            await reply.play(resampler.pcm(samples, 16_000) + resampler.flush())
            await reply.finish_playing()
        except asyncio.CancelledError:
            reply.interrupt("client_cancelled")
            raise

    async def reply(self, request: ReplyRequest) -> None:
        self._ctx.send(
            events.error(
                "the echo agent only plays back what it hears; it cannot answer text",
                code="unsupported_in_echo_mode",
            )
        )
