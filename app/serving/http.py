"""uvicorn's h11 protocol, bounded: a connection is counted from its accept, and a request
must arrive whole (head and body) within request_s of the connection opening or of the
answer before it ending.

h11, not httptools: h11 holds at most max_incomplete_event_size of an unfinished request
head (httptools reads a header or URL of any size, by appending, and queues every
pipelined request it has read), and reads the next pipelined request only once the
answer to this one is written, so a client that never reads its answers stops being read.
"""

from __future__ import annotations

import asyncio
from typing import Any, ClassVar

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.protocols.utils import get_remote_addr

from app.serving.connections import ConnectionLimits
from app.serving.websocket import BoundedWebSocket

REFUSED = (
    b"HTTP/1.1 503 Service Unavailable\r\nretry-after: 2\r\ncontent-length: 0\r\n"
    b"connection: close\r\n\r\n"
)
TOO_SLOW = b"HTTP/1.1 408 Request Timeout\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"


class BoundedHttp(H11Protocol):
    # Set on a subclass made for one server (serving.protocols).
    connection_limits: ClassVar[ConnectionLimits]
    request_s: ClassVar[float]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._counted_as: str | None = None
        self._deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        peer = get_remote_addr(transport)
        self._counted_as = self.connection_limits.take(peer[0] if peer else "")
        if self._counted_as is None:
            self.transport = transport
            transport.write(REFUSED)
            transport.close()
            return
        super().connection_made(transport)
        self._start_clock()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_clock()
        if self._counted_as is None:
            return  # refused at once: uvicorn's state never knew it
        self.connection_limits.give_back(self._counted_as)
        self._counted_as = None
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.conn.their_state not in (h11.IDLE, h11.SEND_BODY):
            self._stop_clock()  # the request is in (or the connection is done with)

    def on_response_complete(self) -> None:
        super().on_response_complete()  # may read a pipelined request at once
        if not self.transport.is_closing() and self.conn.their_state in (h11.IDLE, h11.SEND_BODY):
            self._start_clock()

    def handle_websocket_upgrade(self, event: h11.Request) -> None:
        self._stop_clock()
        counted_as, self._counted_as = self._counted_as, None
        super().handle_websocket_upgrade(event)
        # The same TCP connection, now the WebSocket protocol's to count and give back.
        socket = self.transport.get_protocol()
        if counted_as is not None:
            if isinstance(socket, BoundedWebSocket):
                socket.counted_as(counted_as)
            else:
                self.connection_limits.give_back(counted_as)

    def _start_clock(self) -> None:
        self._stop_clock()
        self._deadline = self.loop.call_later(self.request_s, self._too_slow)

    def _stop_clock(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _too_slow(self) -> None:
        self._deadline = None
        if self.transport.is_closing():
            return
        # Nothing of a request yet is an idle connection: closed without a word.
        started = self.conn.their_state is h11.SEND_BODY or self.conn.trailing_data[0]
        if started and self.conn.our_state in (h11.IDLE, h11.SEND_RESPONSE):
            self.transport.write(TOO_SLOW)
        self.transport.close()
