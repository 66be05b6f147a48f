"""One conversation: per-session state only. The engines it uses are shared."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any, ClassVar

from app import events
from app.audio.vad import SpeechEnded, SpeechPaused, SpeechResumed, SpeechStarted, TurnDetector
from app.config import Settings
from app.engines import Engines
from app.errors import EndOfStream, EngineError
from app.session.bargein import BargeIn
from app.session.context import AudioOut, TurnContext
from app.session.history import History
from app.session.turn import AgentResponder, EchoResponder, Responder, UserTurn
from app.tasks import CloseOnce, cancel_task, spawn

log = logging.getLogger(__name__)

# Finished user turns waiting for the agent. If the user keeps talking while a
# reply is still running, the oldest waiting turn is dropped (and the client told).
TURN_QUEUE_SIZE = 2


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
        self.detector = TurnDetector(settings.vad)
        self._barge_in = BargeIn(settings.vad)
        self.history = History(settings.llm.system_prompt, settings.llm.max_history_messages)
        self._ctx = TurnContext(session_id, self.history, audio, send)
        self._responder = self._make_responder(engines)
        self._turns: asyncio.Queue[UserTurn] = asyncio.Queue(maxsize=TURN_QUEUE_SIZE)
        self._current: UserTurn | None = None
        self._speculative: UserTurn | None = None
        self._item_id = events.new_id("item")
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

    def on_events_open(self) -> None:
        self._send(events.session_created(events.session_object(self.id, self._settings)))

    def on_client_event(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        handler = self._client_events.get(str(kind))
        if handler is None:
            self._send(
                events.error(f"unsupported client event type: {kind!r}", code="unknown_event")
            )
            return
        handler(self, event)

    def feed_audio(self, pcm16k: bytes) -> None:
        """Inbound 16 kHz mono s16. Runs in the reader task: must stay cheap."""
        for event in self.detector.push(pcm16k):
            if isinstance(event, SpeechStarted):
                self.last_speech_at = time.monotonic()
                self._send(events.speech_started(self._item_id, event.audio_start_ms))
            elif isinstance(event, SpeechPaused):
                self._speculate(event.audio)
            elif isinstance(event, SpeechResumed):
                self._abandon_speculation()
            elif isinstance(event, SpeechEnded):
                self._send(events.speech_stopped(self._item_id, event.audio_end_ms))
                if self._barge_in.echo_only:
                    self._abandon_speculation()
                    log.info("dropped an utterance as echo", extra={"session_id": self.id})
                elif self._speculative is not None:
                    self._speculative.confirm()
                    self._speculative = None
                    log.debug("turn ended; speculative reply kept", extra={"session_id": self.id})
                else:
                    self._enqueue(UserTurn.finished(self.id, event.audio, self._item_id))
                self._item_id = events.new_id("item")
        self._watch_for_barge_in(pcm16k)

    def _watch_for_barge_in(self, pcm16k: bytes) -> None:
        reply = self._ctx.reply
        audio = self._ctx.audio
        agent_db = audio.output_level_db() if reply is not None and audio.playing else None
        user_speaking = self._barge_in.update(pcm16k, self.detector, agent_db)
        if user_speaking and reply is not None and self._settings.vad.interrupt_response:
            reply.interrupt("turn_detected")

    def interrupt(self, reason: str) -> bool:
        """Stop the reply the user is hearing, if any."""
        reply = self._ctx.reply
        return reply is not None and reply.interrupt(reason)

    def _cancel_response(self, event: dict[str, Any]) -> None:
        reply = self._ctx.reply
        wanted = event.get("response_id")
        if reply is None or (wanted and wanted != reply.response_id):
            self._send(
                events.error("no response in progress to cancel", code="response_cancel_not_active")
            )
            return
        reply.interrupt("client_cancelled")

    def _clear_output(self, event: dict[str, Any]) -> None:
        if not self.interrupt("client_cancelled"):
            self._send(events.error("no audio is playing", code="output_audio_buffer_empty"))

    def _truncate_item(self, event: dict[str, Any]) -> None:
        item_id, audio_end_ms = event.get("item_id"), event.get("audio_end_ms")
        if not isinstance(item_id, str) or not isinstance(audio_end_ms, int) or audio_end_ms < 0:
            self._send(
                events.error(
                    "conversation.item.truncate needs item_id (string) and audio_end_ms "
                    "(integer >= 0)",
                    code="invalid_value",
                )
            )
            return
        reply = self._ctx.reply
        if reply is not None and reply.item_id == item_id:
            reply.interrupt("client_cancelled", heard_ms=audio_end_ms)
            return
        message = self.history.find(item_id)
        if message is None or message.role != "assistant":
            self._send(events.error(f"no assistant item {item_id!r}", code="item_not_found"))
            return
        if audio_end_ms > message.audio_ms:
            self._send(
                events.error(
                    f"audio_end_ms {audio_end_ms} is past the end of the item's audio "
                    f"({message.audio_ms:.0f} ms)",
                    code="invalid_value",
                )
            )
            return
        self.history.truncate(message, audio_end_ms)
        self._send(events.item_truncated(item_id, audio_end_ms))

    _client_events: ClassVar[dict[str, Callable[[Session, dict[str, Any]], None]]] = {
        "response.cancel": _cancel_response,
        "output_audio_buffer.clear": _clear_output,
        "conversation.item.truncate": _truncate_item,
    }

    def _speculate(self, audio: bytes) -> None:
        """Start the reply during the silence window, if the agent has nothing else to do.

        Only when idle: a reply still running would be missing from the history
        the speculative prompt is built on.
        """
        if self._current is not None or not self._turns.empty():
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

    def _enqueue(self, turn: UserTurn) -> None:
        if self._turns.full():
            dropped = self._turns.get_nowait()
            dropped.abandoned = True
            log.warning(
                "turn queue full; dropping %s", dropped.item_id, extra={"session_id": self.id}
            )
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
            # A child task, so a speculative reply can be cancelled without the worker.
            turn.task = asyncio.create_task(self._responder.respond(turn), name=f"{self.id}:reply")
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
