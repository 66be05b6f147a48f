"""One user turn and the agent's spoken reply: STT -> LLM -> clauses -> TTS -> track.

The LLM streams into a small clause queue while TTS works through it, so the
first clause is spoken while the rest is still being generated, and clause k+1
is synthesized while clause k plays (the track buffers ahead of playout).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from app import events
from app.audio.chunker import ClauseChunker
from app.audio.resample import Resampler
from app.audio.vad import SpeechEnded
from app.engines.llm import ChatLLM, ChatMessage
from app.engines.stt import SpeechToText
from app.engines.tts import TextToSpeech
from app.errors import EngineError
from app.session.history import History
from app.session.tasks import cancel_task, spawn
from app.session.timings import TurnTimings

log = logging.getLogger(__name__)

# LLM deltas are read only this many clauses ahead of TTS; past that, reading
# pauses (backpressure reaches vLLM through TCP) rather than buffering.
CLAUSE_QUEUE_SIZE = 4
FIRST_FRAME_WAIT_S = 2.0


class AudioOut(Protocol):
    """Where reply audio goes: the paced WebRTC track (or, later, a WebSocket)."""

    rate: int

    async def write(self, pcm: bytes, on_start: Callable[[], None] | None = None) -> None: ...

    def clear(self) -> int: ...


@dataclass(slots=True)
class TurnContext:
    session_id: str
    history: History
    audio: AudioOut
    send: Callable[[events.Event], None]


class Responder(Protocol):
    async def respond(self, utterance: SpeechEnded, item_id: str, timings: TurnTimings) -> None: ...


class _Playout:
    """Tracks the first reply frame going out; callbacks run inside the track's recv()."""

    def __init__(self, timings: TurnTimings) -> None:
        self._timings = timings
        self.started = asyncio.get_running_loop().create_future()

    def on_start(self, then: Callable[[], None] | None = None) -> Callable[[], None]:
        def fire() -> None:
            self._timings.mark("first_frame_sent")
            if not self.started.done():
                self.started.set_result(None)
            if then is not None:
                then()

        return fire

    async def wait_started(self) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(self.started), FIRST_FRAME_WAIT_S)


class AgentResponder:
    def __init__(
        self, ctx: TurnContext, stt: SpeechToText, llm: ChatLLM, tts: TextToSpeech
    ) -> None:
        self._ctx = ctx
        self._stt = stt
        self._llm = llm
        self._tts = tts

    async def respond(self, utterance: SpeechEnded, item_id: str, timings: TurnTimings) -> None:
        ctx = self._ctx
        transcript = await self._stt.transcribe(utterance.audio)
        timings.mark("stt_done")
        ctx.send(events.transcription_completed(item_id, transcript, len(utterance.audio) / 32_000))
        if not transcript:
            log.info("empty transcript; no reply", extra={"session_id": ctx.session_id})
            return
        ctx.history.add("user", transcript)
        await self.speak(ctx.history.prompt(), timings)

    async def speak(self, prompt: list[ChatMessage], timings: TurnTimings) -> None:
        ctx = self._ctx
        response_id, item_id = events.new_id("resp"), events.new_id("item")
        ctx.send(events.response_created(response_id))
        clauses: asyncio.Queue[str | None] = asyncio.Queue(maxsize=CLAUSE_QUEUE_SIZE)
        producer = spawn(self._generate(prompt, clauses, timings), f"{ctx.session_id}:llm")
        playout = _Playout(timings)
        # One resampler per reply: stateful across its clauses, flushed at the end.
        resampler = Resampler(ctx.audio.rate)
        spoken: list[str] = []
        status, failure = "completed", None
        try:
            while (clause := await clauses.get()) is not None:
                speech = await self._tts.synthesize(clause)
                timings.mark("tts_first_audio")
                delta = clause if not spoken else " " + clause
                spoken.append(clause)
                send_delta = _bind(ctx.send, events.transcript_delta(response_id, item_id, delta))
                await ctx.audio.write(
                    resampler.pcm(speech.samples, speech.rate), playout.on_start(send_delta)
                )
            await ctx.audio.write(resampler.flush())
            await producer  # re-raise what ended the generation, if anything
        except EngineError as exc:
            status, failure = "failed", {"type": "server_error", "message": str(exc)}
            log.error("reply failed: %s", exc, extra={"session_id": ctx.session_id})
            ctx.send(events.error(str(exc), type_="server_error", code="engine_error"))
        finally:
            await cancel_task(producer)

        text = " ".join(spoken)
        if text:
            ctx.history.add("assistant", text)
            await playout.wait_started()
        ctx.send(events.transcript_done(response_id, item_id, text))
        output = [events.assistant_item(item_id, text, "completed" if text else "incomplete")]
        ctx.send(
            events.response_done(
                response_id,
                status,
                output=output,
                timings_ms=timings.as_ms(),
                reason="error" if failure else None,
                error=failure,
            )
        )
        log.info(
            "turn %s: %s | %r",
            status,
            _format_ms(timings.as_ms()),
            text[:80],
            extra={"session_id": ctx.session_id},
        )

    async def _generate(
        self, prompt: list[ChatMessage], clauses: asyncio.Queue[str | None], timings: TurnTimings
    ) -> None:
        chunker = ClauseChunker()
        try:
            async with contextlib.aclosing(self._llm.stream(prompt)) as deltas:
                async for delta in deltas:
                    timings.mark("llm_first_token")
                    for clause in chunker.push(delta):
                        timings.mark("first_clause")
                        await clauses.put(clause)
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

    async def respond(self, utterance: SpeechEnded, item_id: str, timings: TurnTimings) -> None:
        import numpy as np

        ctx = self._ctx
        response_id = events.new_id("resp")
        ctx.send(events.response_created(response_id))
        playout = _Playout(timings)
        resampler = Resampler(ctx.audio.rate)
        samples = np.frombuffer(utterance.audio, dtype=np.int16)
        pcm = resampler.pcm(samples, 16_000) + resampler.flush()
        await ctx.audio.write(pcm, playout.on_start())
        await playout.wait_started()
        ctx.send(
            events.response_done(response_id, "completed", output=[], timings_ms=timings.as_ms())
        )


def _bind(send: Callable[[events.Event], None], event: events.Event) -> Callable[[], None]:
    return lambda: send(event)


def _format_ms(timings: dict[str, float]) -> str:
    return " ".join(f"{stage}={ms:.0f}ms" for stage, ms in timings.items())
