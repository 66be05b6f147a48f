"""What a call is made of: its transport, its dialect, its session on a slot, and why it
may end. calls.py builds calls from these and runs them."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from app.errors import SignallingError
from app.realtime.session_config import PARAMS
from app.session.messages import SessionMessage
from app.session.options import OptionChanges
from app.session.pool import Slot
from app.session.refusals import OptionError
from app.session.session import Session

# Why a call ended, as its dialect tells the client at the end.
ENDINGS = {
    "connect_timeout": "the peer did not connect in time",
    "media_timeout": "no audio arrived from the peer",
    "idle_timeout": "nobody spoke for too long",
    "session_expired": "the session reached its maximum duration",
    "hangup": "the call was hung up",
    "shutdown": "the server is shutting down",
}


class Transport(Protocol):
    """How a call reaches its client: a WebRTC peer or a WebSocket."""

    ended: asyncio.Event
    watches_media: bool  # silence on the wire means the client is gone

    async def wait_connected(self, timeout_s: float) -> bool: ...

    def last_input_at(self) -> float | None: ...

    async def flush(self, timeout_s: float) -> None:
        """Give what is queued for the client a chance to leave."""
        ...

    async def close(self) -> None: ...


class Dialect(Protocol):
    """How a call's client talks. It drives the Session with verbs; these are the rest."""

    def deliver(self, message: SessionMessage) -> None:
        """A message from the session, to word for the client."""
        ...

    def call_ended(self, code: str, message: str) -> None:
        """The call is over (a code from ENDINGS): the last thing the client hears."""
        ...


def configure(session: Session, changes: Sequence[OptionChanges]) -> None:
    """A call's session config (from its client secret, its offer), before it starts."""
    for change in changes:
        try:
            session.configure(change)
        except OptionError as exc:
            param = PARAMS.get(exc.option, exc.option)
            raise SignallingError(f"session config: {exc} ({param})") from exc


@dataclass(slots=True)
class Call:
    slot: Slot
    transport: Transport
    dialect: Dialect
    session: Session
    started: float = field(default_factory=time.monotonic)
    supervisor: asyncio.Task[None] | None = None
    stop_reason: str | None = None
    stop: asyncio.Event = field(default_factory=asyncio.Event)

    def request_stop(self, reason: str) -> None:
        self.stop_reason = self.stop_reason or reason
        self.stop.set()
