"""uvicorn's websockets (sans-I/O) protocol, bounded: how many frames a client may send a
second, and how much JSON structure its text messages may hold.

Every frame costs the event loop the same few microseconds whatever it carries (a ping is
answered, a continuation appended), so frames are counted, not bytes. A text message is
charged the objects and arrays it could hold ('[' and '{', counted in C before any JSON
parser sees it): json.loads spends ~0.6 µs on each, 0.8 s on 4 MiB of '[],'. Either bound
broken closes the socket: 1009 for one message with more structure than the burst, 1008
for a client over the rate.
"""

from __future__ import annotations

import logging
from typing import Any, ClassVar

from uvicorn._types import ASGIReceiveEvent
from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol
from websockets.frames import Frame, Opcode
from websockets.http11 import Request

from app.serving.connections import Allowance, ConnectionLimits

log = logging.getLogger(__name__)

POLICY_VIOLATION = 1008
MESSAGE_TOO_BIG = 1009
# Data is parsed this much at a time, the frame budget checked between: a read of 256 KiB
# of 6-byte frames would otherwise be 40,000 frames parsed before the first is counted.
PARSE_STEP = 16 * 1024
CLOSE_AFTER_S = 1.0
FRAME_BURST_S = 20  # the frame allowance holds this many seconds' worth
JSON_BURST_S = 10  # and the JSON one this many: also the most one message may hold


class BoundedWebSocket(WebSocketsSansIOProtocol):
    # Set on a subclass made for one server (serving.protocols).
    connection_limits: ClassVar[ConnectionLimits | None] = None
    frames_per_s: ClassVar[float]
    json_nodes_per_s: ClassVar[float]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._frames = Allowance(self.frames_per_s, self.frames_per_s * FRAME_BURST_S)
        self._json_burst = self.json_nodes_per_s * JSON_BURST_S
        self._json_nodes = Allowance(self.json_nodes_per_s, self._json_burst)
        self._counted_as: str | None = None
        self._refused = False
        self._unparsed = bytearray()  # read, not yet parsed: at most a read or two

    def counted_as(self, key: str) -> None:
        """Take over the count of the HTTP connection this socket was upgraded from."""
        self._counted_as = key

    def connection_lost(self, exc: Exception | None) -> None:
        if self._counted_as is not None and self.connection_limits is not None:
            self.connection_limits.give_back(self._counted_as)
            self._counted_as = None
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        self._unparsed += data
        self._parse()

    async def receive(self) -> ASGIReceiveEvent:
        message = await super().receive()
        if not self.read_paused and self._unparsed:
            self.loop.call_soon(self._parse)  # what came behind the message just taken
        return message

    def _parse(self) -> None:
        # A message waiting for the app stops the parsing (uvicorn pauses the reading
        # too): the app sees every message before a later one breaks a bound, and a
        # client's flood waits in its own socket buffers, not here.
        while self._unparsed and not self._refused and not self.read_paused:
            step = bytes(self._unparsed[:PARSE_STEP])
            del self._unparsed[:PARSE_STEP]
            self.conn.receive_data(step)
            if self.conn.parser_exc is not None:
                self.handle_parser_exception()
                return
            self.handle_events()

    def handle_events(self) -> None:
        for event in self.conn.events_received():
            if self._refused:
                return
            if isinstance(event, Request):
                self.handle_connect(event)
            elif not isinstance(event, Frame):
                continue  # a Response: the server's own, never received
            elif not self._frames.spend(1):
                self._refuse(POLICY_VIOLATION, "too many frames")
            else:
                self._handle_frame(event)

    def _handle_frame(self, frame: Frame) -> None:
        match frame.opcode:
            case Opcode.TEXT:
                self.handle_text(frame)
            case Opcode.BINARY:
                self.handle_bytes(frame)
            case Opcode.CONT:
                self.handle_cont(frame)
            case Opcode.PING:
                self.handle_ping()
            case Opcode.PONG:
                self.handle_pong(frame)
            case Opcode.CLOSE:
                self.handle_close(frame)

    def send_receive_event_to_app(self) -> None:
        if self.curr_msg_data_type == "text":
            nodes = sum(part.count(b"[") + part.count(b"{") for part in self.frames)
            if nodes > self._json_burst:
                self.frames = []
                self._refuse(MESSAGE_TOO_BIG, f"more than {self._json_burst:.0f} JSON objects")
                return
            if not self._json_nodes.spend(nodes):
                self.frames = []
                self._refuse(POLICY_VIOLATION, "too much JSON too fast")
                return
        super().send_receive_event_to_app()

    def _refuse(self, code: int, reason: str) -> None:
        self._refused = True
        log.warning("closed a WebSocket from %s: %s", self.client[0] if self.client else "?",
                    reason)  # fmt: skip
        if self.transport.is_closing():
            return
        self.conn.fail(code, reason)
        self.transport.write(b"".join(self.conn.data_to_send()))
        self.close_sent = True
        # What the client still sends is read and dropped a moment before the socket
        # closes: closed with its data unread, the kernel would send a reset, and the
        # client could lose the close frame that says why.
        self.close_timer = self.loop.call_later(CLOSE_AFTER_S, self.transport.close)
