"""The `oai-events` data channel: text messages both ways, never buffered without limit.

What the messages say is the dialect's business (app/realtime); this only moves them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import Callable

from aiortc import RTCDataChannel

from app.errors import MessageTooLarge

log = logging.getLogger(__name__)

EVENTS_LABEL = "oai-events"
# Events sent before the channel opens wait here; the oldest go first if it fills.
PENDING_EVENTS = 64
# Past this much unsent data the peer is not reading; drop what is only cosmetic.
HIGH_WATER_BYTES = 1 << 20
# Past this much, even events that matter: the call ends rather than buffer without bound.
STALLED_BYTES = 8 << 20
MAX_MESSAGE_BYTES = 256 * 1024


class PeerEvents:
    def __init__(
        self,
        session_id: str,
        on_stalled: Callable[[], None] = lambda: None,
        *,
        max_message_bytes: int = MAX_MESSAGE_BYTES,
    ) -> None:
        """`on_stalled`: the peer has stopped reading; its call should end.
        `max_message_bytes`: the largest client event taken (limits.event_bytes)."""
        self.max_message_bytes = max_message_bytes
        self._session_id = session_id
        self._on_stalled = on_stalled
        self._channel: RTCDataChannel | None = None
        self._pending: deque[str] = deque(maxlen=PENDING_EVENTS)
        self.dropped = 0
        self.on_open: Callable[[], None] = lambda: None
        self.on_message: Callable[[str | bytes], None] = lambda data: None

    def attach(self, channel: RTCDataChannel) -> None:
        if channel.label != EVENTS_LABEL:
            log.info(
                "ignoring data channel %r", channel.label, extra={"session_id": self._session_id}
            )
            return
        self._channel = channel
        channel.on("message", self._received)
        if channel.readyState == "open":
            self._opened()
        else:
            channel.on("open", self._opened)

    def _received(self, data: str | bytes) -> None:
        # Runs inside aiortc's DTLS loop: what escapes from here would end the call.
        try:
            self.on_message(data)
        except Exception:
            log.exception("event handling failed", extra={"session_id": self._session_id})

    def _opened(self) -> None:
        assert self._channel is not None
        while self._pending:
            self._channel.send(self._pending.popleft())
        self.on_open()

    def send_text(self, text: str, *, droppable: bool = False) -> None:
        """Raises MessageTooLarge for a message over what the peer takes in one."""
        channel = self._channel
        if channel is None or channel.readyState == "connecting":
            self._pending.append(text)
            return
        if channel.readyState != "open":
            return
        if droppable and channel.bufferedAmount > HIGH_WATER_BYTES:
            if not self.dropped:
                log.warning(
                    "peer is not reading its events; dropping deltas",
                    extra={"session_id": self._session_id},
                )
            self.dropped += 1
            return
        if channel.bufferedAmount > STALLED_BYTES:
            log.warning("peer is not reading its events; ending the call",
                        extra={"session_id": self._session_id})  # fmt: skip
            self._on_stalled()
            return
        try:
            channel.send(text)
        except ValueError as exc:  # over the peer's max-message-size (aiortc checks)
            raise MessageTooLarge(str(exc)) from None

    async def flush(self, timeout_s: float) -> None:
        """Give queued events a chance to leave before the channel closes."""
        channel = self._channel
        if channel is None or channel.readyState != "open" or channel.bufferedAmount == 0:
            return
        drained = asyncio.Event()
        channel.bufferedAmountLowThreshold = 0
        channel.once("bufferedamountlow", drained.set)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout_s):
                await drained.wait()

    def close(self) -> None:
        if self._channel is not None and self._channel.readyState == "open":
            self._channel.close()
