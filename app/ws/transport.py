"""One call over a WebSocket: text messages both ways, reply audio inside them.

Outgoing messages wait in an outbox written by one task, bounded in messages and in
bytes. Reply audio waits for room there (backpressure); any other message finding it
full means the client stopped reading, and the call ends rather than buffering without
limit. What the messages say is the dialect's business.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from starlette.websockets import WebSocket, WebSocketDisconnect, WebSocketState

from app.errors import EndOfStream
from app.tasks import cancel_task, spawn

log = logging.getLogger(__name__)

OUTBOX_EVENTS = 256
# Seconds of reply audio are ~40 KB of base64 each; what does not fit is a client that
# stopped reading (or never reads what its own events make us say).
OUTBOX_BYTES = 4 * 1024 * 1024
# limits.ws_message_bytes' default: a minute of 24 kHz pcm16 in one append, in base64.
MAX_MESSAGE_BYTES = 4 * 1024 * 1024


class WsTransport:
    def __init__(
        self,
        websocket: WebSocket,
        session_id: str,
        *,
        max_message_bytes: int = MAX_MESSAGE_BYTES,
        heard_at: Callable[[], float | None] | None = None,
    ) -> None:
        """`max_message_bytes`: the largest client message taken (limits.ws_message_bytes).
        `heard_at`: when the client's audio last came, for a client that always sends it
        (a carrier's media stream): silence on the socket then means it is gone. A
        Realtime client may talk in text alone, and that is fine."""
        self.max_message_bytes = max_message_bytes
        self.watches_media = heard_at is not None
        self._heard_at = heard_at
        self._ws = websocket
        self.session_id = session_id
        self.ended = asyncio.Event()
        self._outbox: asyncio.Queue[str] = asyncio.Queue(maxsize=OUTBOX_EVENTS)
        self._outbox_bytes = 0
        self._room = asyncio.Event()  # set whenever the outbox's bytes are under its bound
        self._room.set()
        self._reader: asyncio.Task[None] | None = None
        self._writer: asyncio.Task[None] | None = None

    def start(self, on_message: Callable[[str | bytes], Awaitable[None] | None]) -> None:
        """`on_message` gets each client message; the next is read once it returns, or
        once what it returns is done (backpressure for a message that takes a while)."""
        self._writer = spawn(self._write(), f"{self.session_id}:ws-write")
        self._reader = spawn(self._read(on_message), f"{self.session_id}:ws-read")

    async def wait_connected(self, timeout_s: float) -> bool:
        return not self.ended.is_set()  # accepted before the session existed

    def last_input_at(self) -> float | None:
        return self._heard_at() if self._heard_at is not None else None

    def send_text(self, text: str, *, droppable: bool = False) -> None:
        """`droppable` is not used: every message waits its turn in the outbox."""
        if self.ended.is_set():
            return
        if not self._has_room(text):
            log.warning("client is not reading its events; ending the call",
                        extra={"session_id": self.session_id})  # fmt: skip
            self._end()
            return
        self._queue(text)

    async def send_when_room(self, text: str) -> None:
        """Reply audio: waits while the outbox is full (backpressure)."""
        while True:
            if self.ended.is_set():
                raise EndOfStream("the WebSocket has closed")
            if self._has_room(text):
                self._queue(text)
                return
            self._room.clear()
            await self._room.wait()

    def _has_room(self, text: str) -> bool:
        # One message bigger than the bound still goes out alone (it echoes the client's own).
        if self._outbox.full():
            return False
        return not self._outbox_bytes or self._outbox_bytes + len(text) <= OUTBOX_BYTES

    def _end(self) -> None:
        self.ended.set()
        self._room.set()  # wakes audio waiting for room: it finds the call over

    def _queue(self, text: str) -> None:
        self._outbox.put_nowait(text)
        self._outbox_bytes += len(text)

    async def _write(self) -> None:
        try:
            while True:
                text = await self._outbox.get()
                await self._ws.send_text(text)
                self._outbox_bytes -= len(text)
                self._room.set()
                self._outbox.task_done()
        except (WebSocketDisconnect, RuntimeError, OSError):
            self._end()

    async def _read(self, on_message: Callable[[str | bytes], Awaitable[None] | None]) -> None:
        try:
            while True:
                message = await self._ws.receive()
                if message["type"] == "websocket.disconnect":
                    break
                data = message.get("text")
                handled = on_message(data if data is not None else message.get("bytes") or b"")
                if handled is not None:
                    await handled
                # Messages already queued are taken without a pause: a flood of them, each
                # heard through the echo canceller, would hold the loop from every call.
                await asyncio.sleep(0)
        except (WebSocketDisconnect, RuntimeError, OSError):
            pass
        finally:
            self._end()

    async def flush(self, timeout_s: float) -> None:
        """Give queued messages a chance to leave before the socket closes."""
        if self._writer is None or self._writer.done():
            return
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout_s):
                await self._outbox.join()

    async def close(self, code: int = 1000, reason: str = "") -> None:
        """Also from the reader, closing on what it read: then it is not cancelled, and
        finds the socket closed when it reads on."""
        self._end()
        if self._reader is not asyncio.current_task():
            await cancel_task(self._reader)
        await cancel_task(self._writer)
        if self._ws.application_state == WebSocketState.CONNECTED:
            with contextlib.suppress(RuntimeError, OSError, WebSocketDisconnect):
                await self._ws.close(code, reason)
