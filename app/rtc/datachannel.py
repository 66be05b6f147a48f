"""The `oai-events` data channel: JSON events both ways, never buffered without limit."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections import deque
from collections.abc import Callable
from typing import Any

from aiortc import RTCDataChannel

from app import events

log = logging.getLogger(__name__)

EVENTS_LABEL = "oai-events"
# Events sent before the channel opens wait here; the oldest go first if it fills.
PENDING_EVENTS = 64
# Past this much unsent data the peer is not reading; drop what is only cosmetic.
HIGH_WATER_BYTES = 1 << 20
DROPPABLE_SUFFIX = ".delta"
MAX_MESSAGE_BYTES = 256 * 1024


class EventChannel:
    def __init__(self, session_id: str) -> None:
        self._session_id = session_id
        self._channel: RTCDataChannel | None = None
        self._pending: deque[str] = deque(maxlen=PENDING_EVENTS)
        self.dropped = 0
        self.on_open: Callable[[], None] = lambda: None
        self.on_event: Callable[[dict[str, Any]], None] = lambda event: None

    def attach(self, channel: RTCDataChannel) -> None:
        if channel.label != EVENTS_LABEL:
            log.info(
                "ignoring data channel %r", channel.label, extra={"session_id": self._session_id}
            )
            return
        self._channel = channel
        channel.on("message", self._on_message)
        if channel.readyState == "open":
            self._opened()
        else:
            channel.on("open", self._opened)

    def _opened(self) -> None:
        assert self._channel is not None
        while self._pending:
            self._channel.send(self._pending.popleft())
        self.on_open()

    def send(self, event: events.Event) -> None:
        payload = json.dumps(event, separators=(",", ":"))
        channel = self._channel
        if channel is None or channel.readyState == "connecting":
            self._pending.append(payload)
            return
        if channel.readyState != "open":
            return
        if channel.bufferedAmount > HIGH_WATER_BYTES and event["type"].endswith(DROPPABLE_SUFFIX):
            if not self.dropped:
                log.warning(
                    "peer is not reading its events; dropping deltas",
                    extra={"session_id": self._session_id},
                )
            self.dropped += 1
            return
        channel.send(payload)

    def _on_message(self, message: str | bytes) -> None:
        event, problem = events.decode_client_event(message, MAX_MESSAGE_BYTES)
        if problem is not None:
            self.send(problem)
        elif event is not None:
            self.on_event(event)

    async def flush(self, timeout_s: float) -> None:
        """Give queued events a chance to leave before the channel closes."""
        channel = self._channel
        if channel is None or channel.readyState != "open" or channel.bufferedAmount == 0:
            return
        drained = asyncio.Event()
        channel.bufferedAmountLowThreshold = 0
        channel.once("bufferedamountlow", drained.set)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(drained.wait(), timeout_s)

    def close(self) -> None:
        if self._channel is not None and self._channel.readyState == "open":
            self._channel.close()
