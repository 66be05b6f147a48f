"""One conversation: per-session state only. The engines it uses are shared."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from app import events
from app.audio.vad import SpeechEnded, SpeechStarted, TurnDetector
from app.config import Settings
from app.engines import Engines
from app.errors import EngineError
from app.session.history import History
from app.session.tasks import cancel_task, spawn
from app.session.timings import TurnTimings
from app.session.turn import AgentResponder, AudioOut, EchoResponder, Responder, TurnContext

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
        self.history = History(settings.llm.system_prompt, settings.llm.max_history_messages)
        self._ctx = TurnContext(session_id, self.history, audio, send)
        self._responder = self._make_responder(engines)
        self._turns: asyncio.Queue[tuple[SpeechEnded, str, TurnTimings]] = asyncio.Queue(
            maxsize=TURN_QUEUE_SIZE
        )
        self._item_id = events.new_id("item")
        self._worker: asyncio.Task[None] | None = None
        self._closed: asyncio.Future[None] | None = None

    def _make_responder(self, engines: Engines) -> Responder:
        if self._settings.agent == "echo":
            return EchoResponder(self._ctx)
        if engines.stt is None or engines.llm is None or engines.tts is None:
            raise EngineError("engines are not loaded")
        return AgentResponder(self._ctx, engines.stt, engines.llm, engines.tts)

    def start(self) -> None:
        self._worker = spawn(self._run_turns(), f"{self.id}:turns")

    def describe(self) -> dict[str, Any]:
        """The session object of `session.created`."""
        vad, tts = self._settings.vad, self._settings.tts
        return {
            "type": "realtime",
            "object": "realtime.session",
            "id": self.id,
            "model": self._settings.llm.model or "embedded",
            "output_modalities": ["audio"],
            "instructions": self.history.system_prompt,
            "audio": {
                "input": {
                    "format": {"type": "audio/pcm", "rate": 24000},
                    "turn_detection": {
                        "type": "server_vad",
                        "prefix_padding_ms": vad.prefix_padding_ms,
                        "silence_duration_ms": vad.silence_ms,
                        "create_response": True,
                        "interrupt_response": False,
                    },
                    "transcription": {"model": "whisper"},
                },
                "output": {
                    "format": {"type": "audio/pcm", "rate": 24000},
                    "voice": tts.voice,
                    "speed": tts.speed,
                },
            },
        }

    def on_events_open(self) -> None:
        self._send(events.session_created(self.describe()))

    def on_client_event(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        self._send(events.error(f"unsupported client event type: {kind!r}", code="unknown_event"))

    def feed_audio(self, pcm16k: bytes) -> None:
        """Inbound 16 kHz mono s16. Runs in the reader task: must stay cheap."""
        for event in self.detector.push(pcm16k):
            if isinstance(event, SpeechStarted):
                self._send(events.speech_started(self._item_id, event.audio_start_ms))
            elif isinstance(event, SpeechEnded):
                self._send(events.speech_stopped(self._item_id, event.audio_end_ms))
                self._enqueue(event, self._item_id)
                self._item_id = events.new_id("item")

    def _enqueue(self, utterance: SpeechEnded, item_id: str) -> None:
        if self._turns.full():
            dropped = self._turns.get_nowait()
            log.warning("turn queue full; dropping %s", dropped[1], extra={"session_id": self.id})
            self._send(
                events.error(
                    "agent busy: an earlier utterance was dropped",
                    type_="server_error",
                    code="turn_dropped",
                )
            )
        self._turns.put_nowait((utterance, item_id, TurnTimings()))

    async def _run_turns(self) -> None:
        while True:
            utterance, item_id, timings = await self._turns.get()
            try:
                await self._responder.respond(utterance, item_id, timings)
            except EngineError as exc:
                log.error("turn failed: %s", exc, extra={"session_id": self.id})
                self._send(events.error(str(exc), type_="server_error", code="engine_error"))

    async def close(self) -> None:
        """Stop the session's work. Safe to call twice; concurrent callers share one close."""
        if self._closed is not None:
            await self._closed
            return
        self._closed = asyncio.get_running_loop().create_future()
        try:
            await cancel_task(self._worker)
        finally:
            self._closed.set_result(None)
