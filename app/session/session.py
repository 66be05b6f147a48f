"""One conversation: per-session state only. The engines it uses are shared."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import numpy as np

from app import events
from app.audio.level import SILENT_DB
from app.audio.resample import Resampler
from app.audio.vad import SpeechEnded, SpeechPaused, SpeechResumed, SpeechStarted, TurnDetector
from app.config import Settings
from app.engines import Engines
from app.errors import EndOfStream, EngineError
from app.session import client_events
from app.session.bargein import BargeIn
from app.session.context import AudioOut, TurnContext
from app.session.history import History
from app.session.options import SessionOptions
from app.session.turn import AgentResponder, EchoResponder, Job, ReplyRequest, Responder, UserTurn
from app.tasks import CloseOnce, cancel_task, spawn

log = logging.getLogger(__name__)

# Finished user turns (and requested responses) waiting for the agent. If the user
# keeps talking while a reply is still running, the oldest waiting one is dropped
# (and the client told).
TURN_QUEUE_SIZE = 2
# With turn detection off, audio waits for input_audio_buffer.commit (beyond
# vad.max_utterance_s the oldest is dropped); a commit needs at least this much.
MIN_COMMIT_MS = 100


class Session:
    def __init__(
        self,
        session_id: str,
        settings: Settings,
        engines: Engines,
        audio: AudioOut,
        send: events.EventSender,
    ) -> None:
        self.id = session_id
        self._settings = settings
        self._send = send
        voices = tuple(getattr(engines.tts, "voices", ()) or ())
        self.options = SessionOptions.from_settings(settings, voices)
        self.detector = TurnDetector(settings.vad)
        self._barge_in = BargeIn(settings.vad)
        self.history = History(self.options.instructions, settings.llm.max_history_messages)
        self._ctx = TurnContext(session_id, self.history, audio, send, options=self.options)
        self._responder = self._make_responder(engines)
        self._turns: asyncio.Queue[Job] = asyncio.Queue(maxsize=TURN_QUEUE_SIZE)
        self._current: Job | None = None
        self._speculative: UserTurn | None = None
        self._item_id = events.new_id("item")
        self._manual = bytearray()  # audio since the last commit, when turn detection is off
        self._appended: Resampler | None = None
        self._worker: asyncio.Task[None] | None = None
        self._closer = CloseOnce(self._close, f"{session_id}:close")
        self.stuck: list[str] = []  # tasks that outlived close(): the slot is quarantined
        self.last_speech_at = time.monotonic()

    def _make_responder(self, engines: Engines) -> Responder:
        if self._settings.agent == "echo":
            return EchoResponder(self._ctx)
        if engines.stt is None or engines.llm is None or engines.tts is None:
            raise EngineError("engines are not loaded")
        return AgentResponder(
            self._ctx,
            engines.stt,
            engines.llm,
            engines.tts,
            first_chunk_words=self._settings.tts.first_chunk_words,
        )

    def start(self) -> None:
        self._worker = spawn(self._run_turns(), f"{self.id}:turns")

    @property
    def ctx(self) -> TurnContext:
        return self._ctx

    @property
    def busy(self) -> bool:
        """A reply is being prepared or played, or one is waiting."""
        return self._current is not None or not self._turns.empty()

    def describe(self) -> dict[str, Any]:
        return self.options.describe(self.id, self._settings.llm.model or "embedded")

    def on_events_open(self) -> None:
        self._send(events.session_created(self.describe()))

    def configure(self, session: dict[str, Any]) -> None:
        """Apply a session.update (raises OptionError); the caller answers session.updated."""
        vad_before = self.options.vad
        self.options.update(session)
        self.history.system_prompt = self.options.instructions
        if self.options.vad is not vad_before:
            self._abandon_speculation()
            self._manual.clear()
            vad = self.options.vad or self._settings.vad
            self.detector = TurnDetector(vad)
            self._barge_in = BargeIn(vad)

    def on_client_event(self, event: dict[str, Any]) -> None:
        # A text-only client talks only in events: they count as the user being there.
        self.last_speech_at = time.monotonic()
        client_events.handle(self, event)

    def feed_audio(self, pcm16k: bytes) -> None:
        """Inbound 16 kHz mono s16. Runs in the reader task: must stay cheap."""
        if self.options.vad is None:
            self._buffer_manual(pcm16k)
            return
        for event in self.detector.push(pcm16k):
            if isinstance(event, SpeechStarted):
                self.last_speech_at = time.monotonic()
                self._send(events.speech_started(self._item_id, event.audio_start_ms))
            elif isinstance(event, SpeechPaused):
                self._speculate(event.audio)
            elif isinstance(event, SpeechResumed):
                self._abandon_speculation()
            elif isinstance(event, SpeechEnded):
                self._speech_ended(event)
        self._watch_for_barge_in(pcm16k)

    def _speech_ended(self, event: SpeechEnded) -> None:
        self._send(events.speech_stopped(self._item_id, event.audio_end_ms))
        if self._barge_in.echo_only:
            self._abandon_speculation()
            log.info("dropped an utterance as echo", extra={"session_id": self.id})
        else:
            self._committed(event.audio)
        self._item_id = events.new_id("item")

    def _committed(self, audio: bytes) -> None:
        """The user's turn is over: a user item exists; transcribe it, maybe answer it."""
        self._send(events.input_committed(self._item_id))
        self._send(events.item_added(events.user_item(self._item_id)))
        respond = self.options.create_response
        if self._speculative is not None:
            self._speculative.respond = respond
            self._speculative.confirm()
            self._speculative = None
            log.debug("turn ended; speculative reply kept", extra={"session_id": self.id})
        else:
            self._enqueue(UserTurn.finished(self.id, audio, self._item_id, respond=respond))

    def append_pcm24k(self, samples: np.ndarray) -> None:
        """input_audio_buffer.append: the WebSocket's microphone (pcm16 mono, 24 kHz)."""
        if self._appended is None:
            self._appended = Resampler(16_000)  # stateful: one per session
        self.feed_audio(self._appended.pcm(samples, 24_000))

    def _buffer_manual(self, pcm16k: bytes) -> None:
        self._manual += pcm16k
        limit = int(self._settings.vad.max_utterance_s * 32_000)
        if len(self._manual) > limit:
            del self._manual[: len(self._manual) - limit]

    def commit_input(self) -> bool:
        """input_audio_buffer.commit: end the turn now. False if there is nothing to commit."""
        if self.options.vad is None:
            if len(self._manual) < MIN_COMMIT_MS * 32:
                return False
            audio, self._manual = bytes(self._manual), bytearray()
            self._committed(audio)
            self._item_id = events.new_id("item")
            return True
        ended = self.detector.force_end()
        if ended is None:
            return False
        self._speech_ended(ended)
        return True

    def clear_input(self) -> None:
        """input_audio_buffer.clear: forget audio not yet committed."""
        self._manual.clear()
        self.detector.reset()
        self._abandon_speculation()

    def request_response(self, instructions: str | None) -> None:
        """response.create: answer from the conversation as it stands."""
        self._enqueue(ReplyRequest(self.id, instructions))

    def _watch_for_barge_in(self, pcm16k: bytes) -> None:
        vad = self.options.vad
        assert vad is not None  # feed_audio only gets here with turn detection on
        # By level, not by whether a reply is queued: echo lags the audio sent. Only
        # the echo guard weighs it, so the per-frame path skips it otherwise.
        level = self._ctx.audio.output_level_db() if vad.echo_guard else SILENT_DB
        agent_db = level if level > SILENT_DB else None
        user_speaking = self._barge_in.update(pcm16k, self.detector, agent_db)
        reply = self._ctx.reply
        if user_speaking and reply is not None and vad.interrupt_response:
            reply.interrupt("turn_detected")

    def interrupt(self, reason: str) -> bool:
        """Stop the reply the user is hearing, if any."""
        reply = self._ctx.reply
        return reply is not None and reply.interrupt(reason)

    def _speculate(self, audio: bytes) -> None:
        """Start the reply during the silence window, if the agent has nothing else to do.

        Only when idle: a reply still running would be missing from the history
        the speculative prompt is built on.
        """
        if self.busy:
            return
        self._speculative = UserTurn.speculative(self.id, audio, self._item_id)
        self._turns.put_nowait(self._speculative)
        log.debug("speculating on a pause", extra={"session_id": self.id})

    def _abandon_speculation(self) -> None:
        turn, self._speculative = self._speculative, None
        if turn is None:
            return
        turn.abandoned = True
        if turn.task is not None:
            turn.task.cancel()
        log.debug("speech resumed; speculative reply dropped", extra={"session_id": self.id})

    def _enqueue(self, turn: Job) -> None:
        if self._turns.full():
            dropped = self._turns.get_nowait()
            dropped.abandoned = True
            log.warning("turn queue full; dropping one", extra={"session_id": self.id})
            self._send(
                events.error(
                    "agent busy: an earlier utterance was dropped",
                    type_="server_error",
                    code="turn_dropped",
                )
            )
        self._turns.put_nowait(turn)

    async def _run_turns(self) -> None:
        while True:
            turn = await self._turns.get()
            if turn.abandoned:
                continue
            if turn.session_id != self.id:  # tagged where made, checked where consumed
                log.error("dropped a turn of %s", turn.session_id, extra={"session_id": self.id})
                continue
            self._current = turn
            work = (
                self._responder.respond(turn)
                if isinstance(turn, UserTurn)
                else self._responder.reply(turn)
            )
            # A child task, so a speculative reply can be cancelled without the worker.
            turn.task = asyncio.create_task(work, name=f"{self.id}:reply")
            try:
                await asyncio.wait([turn.task])
            finally:
                self._current = None
                await cancel_task(turn.task)
            if turn.task.cancelled():
                continue
            exc = turn.task.exception()
            if isinstance(exc, EndOfStream):
                log.info("peer stopped listening mid-reply", extra={"session_id": self.id})
            elif isinstance(exc, EngineError):
                log.error("turn failed: %s", exc, extra={"session_id": self.id})
                self._send(events.error(str(exc), type_="server_error", code="engine_error"))
            elif exc is not None:
                log.error("turn crashed", exc_info=exc, extra={"session_id": self.id})
                self._send(events.error("internal error", type_="server_error", code="internal"))

    async def close(self) -> list[str]:
        """Stop the session's work; return the names of tasks that would not stop.

        Safe to call twice; concurrent callers share one close.
        """
        await self._closer()
        return self.stuck

    async def _close(self) -> None:
        reply = self._current.task if self._current is not None else None
        tasks = [task for task in (self._worker, reply) if task is not None and not task.done()]
        for task in tasks:
            task.cancel()
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=self._settings.pool.drain_timeout_s)
            self.stuck = sorted(task.get_name() for task in pending)
