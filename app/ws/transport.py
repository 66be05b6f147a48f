"""One Realtime session over a WebSocket: JSON events both ways, audio inside them.

Outgoing events wait in a bounded outbox written by one task. Reply audio
waits for room there (backpressure); any other event finding it full means the
client stopped reading, and the call ends rather than buffering without limit.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Callable
from typing import Any

from starlette.websockets import WebSocket, WebSocketDisconnect, WebSocketState

from app import events
from app.errors import EndOfStream
from app.tasks import cancel_task, spawn
from app.ws.audio import WebSocketAudio

log = logging.getLogger(__name__)

OUTBOX_EVENTS = 256
# input_audio_buffer.append may carry 15 MiB of audio, base64 grows it by a third.
MAX_MESSAGE_BYTES = 21 * 1024 * 1024


class WsTransport:
    watches_media = False  # a text-only client sends no audio, and that is fine

    def __init__(self, websocket: WebSocket, session_id: str) -> None:
        self._ws = websocket
        self.session_id = session_id
        self.ended = asyncio.Event()
        self._outbox: asyncio.Queue[events.Event] = asyncio.Queue(maxsize=OUTBOX_EVENTS)
        self.audio = WebSocketAudio(session_id, self._put_audio)
        self._reader: asyncio.Task[None] | None = None
        self._writer: asyncio.Task[None] | None = None

    def start(self, on_event: Callable[[dict[str, Any]], None]) -> None:
        self._writer = spawn(self._write(), f"{self.session_id}:ws-write")
        self._reader = spawn(self._read(on_event), f"{self.session_id}:ws-read")

    async def wait_connected(self, timeout_s: float) -> bool:
        return not self.ended.is_set()  # accepted before the session existed

    def last_input_at(self) -> float | None:
        return None

    def send(self, event: events.Event) -> None:
        if self.ended.is_set():
            return
        try:
            self._outbox.put_nowait(event)
        except asyncio.QueueFull:
            log.warning("client is not reading its events; ending the call",
                        extra={"session_id": self.session_id})  # fmt: skip
            self.ended.set()

    async def _put_audio(self, event: events.Event) -> None:
        if self.ended.is_set():
            raise EndOfStream("the WebSocket has closed")
        await self._outbox.put(event)

    async def _write(self) -> None:
        try:
            while True:
                event = await self._outbox.get()
                await self._ws.send_text(json.dumps(event, separators=(",", ":")))
        except (WebSocketDisconnect, RuntimeError, OSError):
            self.ended.set()

    async def _read(self, on_event: Callable[[dict[str, Any]], None]) -> None:
        try:
            while True:
                message = await self._ws.receive()
                if message["type"] == "websocket.disconnect":
                    break
                data = message.get("text")
                if data is None:
                    data = message.get("bytes") or b""
                event, problem = events.decode_client_event(data, MAX_MESSAGE_BYTES)
                if problem is not None:
                    self.send(problem)
                elif event is not None:
                    on_event(event)
        except (WebSocketDisconnect, RuntimeError, OSError):
            pass
        finally:
            self.ended.set()

    async def flush(self, timeout_s: float) -> None:
        """Give queued events a chance to leave before the socket closes."""
        deadline = asyncio.get_running_loop().time() + timeout_s
        while not self._outbox.empty() and self._writer is not None and not self._writer.done():
            if asyncio.get_running_loop().time() > deadline:
                return
            await asyncio.sleep(0.01)

    async def close(self, code: int = 1000, reason: str = "") -> None:
        self.ended.set()
        await cancel_task(self._reader)
        await cancel_task(self._writer)
        if self._ws.application_state == WebSocketState.CONNECTED:
            with contextlib.suppress(RuntimeError, OSError, WebSocketDisconnect):
                await self._ws.close(code, reason)
