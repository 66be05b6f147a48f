"""Answering one job: transcribe the turn, then speak the responder's reply.

Everything the client would see waits for the user's turn to have really
ended (`UserTurn.when_ended`), so a speculative answer stays invisible and
silent until then, and vanishes with its task if the user goes on talking.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from app.audio.resample import Resampler
from app.engines.llm import ChatMessage
from app.errors import EngineError
from app.session import messages as msg
from app.session.audio_out import AudioOut
from app.session.history import History, Message
from app.session.options import SessionOptions
from app.session.reply import Emit, Reply
from app.session.responders import Responder, SpeechRequest
from app.session.turn import Job, ReplyRequest, UserTurn

log = logging.getLogger(__name__)


class Answerer:
    def __init__(
        self,
        session_id: str,
        responder: Responder,
        *,
        history: History,
        audio: AudioOut,
        emit: Emit,
    ) -> None:
        self._session_id = session_id
        self._responder = responder
        self._history = history
        self._audio = audio
        self._emit = emit

    async def answer(self, job: Job, options: SessionOptions) -> None:
        """Runs as `job.task`."""
        if isinstance(job, UserTurn):
            await self._answer_turn(job, options)
        elif isinstance(job, ReplyRequest):
            prompt = self._history.prompt(job.instructions or options.instructions)
            await self._speak(job, self._request(job, prompt, options), None)

    async def _answer_turn(self, turn: UserTurn, options: SessionOptions) -> None:
        transcript = await self._responder.transcribe(turn.audio)
        prompt: list[ChatMessage] = []
        if transcript is not None:
            turn.timings.mark("stt_done")
            turn.when_ended(lambda: self._heard(turn, transcript))
            if not transcript or not turn.respond:
                await turn.wait_ended()
                if not transcript:
                    log.info("empty transcript; no reply", extra={"session_id": self._session_id})
                return
            prompt = [
                *self._history.prompt(options.instructions),
                {"role": "user", "content": transcript},
            ]
        await self._speak(turn, self._request(turn, prompt, options), turn)

    def _heard(self, turn: UserTurn, transcript: str) -> None:
        self._emit(msg.UserTranscribed(turn.item_id, transcript, len(turn.audio) / 32_000))
        if transcript:
            self._history.add(Message("user", transcript, turn.item_id))

    def _request(
        self, job: Job, prompt: list[ChatMessage], options: SessionOptions
    ) -> SpeechRequest:
        heard = job.audio if isinstance(job, UserTurn) else b""
        return SpeechRequest(
            self._session_id, prompt, heard, options.voice, options.speed, job.timings
        )

    async def _speak(self, job: Job, request: SpeechRequest, turn: UserTurn | None) -> None:
        assert job.task is not None, "a job is answered in its own task"
        reply = job.reply = Reply(
            self._session_id,
            task=job.task,
            audio=self._audio,
            history=self._history,
            emit=self._emit,
            timings=job.timings,
        )
        when_ended: Callable[[Callable[[], None]], None] = (
            turn.when_ended if turn is not None else lambda action: action()
        )
        # Watched from the start, so the reply is announced as soon as the turn ends.
        when_ended(reply.open)
        # One resampler per reply: stateful across its pieces, flushed at the end.
        resampler = Resampler(reply.rate)
        failure: str | None = None
        try:
            async with contextlib.aclosing(self._responder.speak(request)) as pieces:
                async for piece in pieces:
                    await _ended(turn)  # nothing plays before the turn has ended
                    samples = resampler.pcm(piece.speech.samples, piece.speech.rate)
                    await reply.play(samples, piece.text)
            await _ended(turn)
            await reply.play(resampler.flush())
        except EngineError as exc:
            await _ended(turn)
            log.error("reply failed: %s", exc, extra={"session_id": self._session_id})
            self._emit(msg.Problem("engine_error", str(exc)))
            failure = str(exc)
        except asyncio.CancelledError:
            reply.interrupt("client_cancelled")  # a no-op if that is what cancelled us
            raise
        except Exception as exc:  # a bug or an engine failing oddly: still end the reply
            log.exception("reply crashed", extra={"session_id": self._session_id})
            await _ended(turn)
            self._emit(msg.Problem("internal", "internal error"))
            failure = f"internal error: {type(exc).__name__}"
        await reply.finish_playing(failure)


async def _ended(turn: UserTurn | None) -> None:
    if turn is not None:
        await turn.wait_ended()
