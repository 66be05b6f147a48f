"""Where a dialect's events go: the call's own channel, and any sideband watchers."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any, Protocol

from app.errors import MessageTooLarge

log = logging.getLogger(__name__)

Event = dict[str, Any]


class EventChannel(Protocol):
    """A WebRTC data channel or a WebSocket, carrying JSON text both ways."""

    max_message_bytes: int

    def send_text(self, text: str, *, droppable: bool = False) -> None:
        """`droppable`: cosmetic (a transcript delta), may be dropped for a peer not reading."""
        ...


class NoChannel:
    """The events channel of a call that has none of its own (a SIP call): its events
    reach only the sideband controllers watching it."""

    max_message_bytes = 256 * 1024

    def send_text(self, text: str, *, droppable: bool = False) -> None:
        pass


class Broadcast:
    """A call's channel and its sideband watchers: every event goes to all of them, an
    answer to one client event to its sender alone."""

    def __init__(self, channel: EventChannel, too_large: Callable[[str, int, str], Event]) -> None:
        """`too_large(type, size, why)`: the error event that tells a channel it missed one."""
        self.channel = channel
        self.watchers: list[EventChannel] = []
        self._too_large = too_large

    def watch(self, watcher: EventChannel) -> None:
        self.watchers.append(watcher)

    def unwatch(self, watcher: EventChannel) -> None:
        if watcher in self.watchers:
            self.watchers.remove(watcher)

    def send(self, event: Event, *, to: EventChannel | None = None, session_id: str = "") -> None:
        text, droppable = as_json(event), event["type"].endswith(".delta")
        for channel in [to] if to is not None else [self.channel, *self.watchers]:
            try:
                channel.send_text(text, droppable=droppable)
            except MessageTooLarge as exc:
                log.warning("%s not sent: %s", event["type"], exc,
                            extra={"session_id": session_id})  # fmt: skip
                channel.send_text(as_json(self._too_large(event["type"], len(text), str(exc))))


def as_json(event: Event) -> str:
    return json.dumps(event, separators=(",", ":"))


MAX_JSON_NODES = 20_000


def decode(data: str | bytes, max_bytes: int) -> tuple[Event, None] | tuple[None, tuple[str, str]]:
    """A client's message as (event, None), or (None, (code, message)) saying what is wrong."""
    if isinstance(data, bytes) or len(data) > max_bytes:
        return None, ("invalid_message", f"events must be JSON text under {max_bytes // 1024} KiB")
    # Counted in C before parsing: json.loads spends ~0.6 µs on each object or array, and
    # 256 KiB of '[],' would hold the loop 50 ms. Brackets in strings count too; no event
    # a client means comes near.
    if data.count("[") + data.count("{") > MAX_JSON_NODES:
        return None, ("invalid_json", f"more than {MAX_JSON_NODES} JSON objects and arrays")
    try:
        event = json.loads(data)
    except ValueError as exc:
        return None, ("invalid_json", f"malformed JSON: {exc}")
    except RecursionError:
        return None, ("invalid_json", "JSON nested too deeply")
    if not isinstance(event, dict) or not isinstance(event.get("type"), str):
        return None, ("invalid_event", "an event is a JSON object with a string 'type'")
    return event, None
