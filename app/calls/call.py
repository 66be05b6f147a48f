"""What a call is made of: its transport, its dialect, its session on a slot, and why it
may end, and how it waits for that. manager.py and the builders beside it make and run calls."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from app.calls.pool import Slot
from app.config import PoolSettings
from app.errors import SignallingError
from app.events.channel import EventChannel
from app.observability.usage import SessionUsage
from app.realtime.session_config import PARAMS
from app.session.messages import SessionMessage
from app.session.options import OptionChanges
from app.session.refusals import OptionError
from app.session.session import Session
from app.tasks import cancel_task, spawn

# Why a call ended, as its dialect tells the client at the end.
ENDINGS = {
    "connect_timeout": "the peer did not connect in time",
    "media_timeout": "no audio arrived from the peer",
    "idle_timeout": "nobody spoke for too long",
    "session_expired": "the session reached its maximum duration",
    "hangup": "the call was hung up",
    "close_requested": "the client closed the session",
    "shutdown": "the server is shutting down",
}


class Transport(Protocol):
    """How a call reaches its client: a WebRTC peer, a WebSocket or a SIP leg."""

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
        """The call is over: the last thing the client hears. `code`: why (one of ENDINGS,
        or peer_closed); `message`: ENDINGS' words for it, empty when the client left."""
        ...


class EventDialect(Dialect, Protocol):
    """An OpenAI dialect (Realtime, Live): JSON events on a channel, sideband watchers."""

    def attach(self, session: Session) -> None: ...

    def opened(self) -> None:
        """The client's event channel is open: greet it."""
        ...

    def receive(self, data: str | bytes, source: EventChannel | None = None) -> None: ...

    async def receive_in_steps(
        self, data: str | bytes, source: EventChannel | None = None
    ) -> None: ...

    def watch(self, controller: EventChannel) -> None: ...

    def unwatch(self, controller: EventChannel) -> None: ...

    def audio_delta(self, pcm24k: bytes) -> str:
        """Reply audio as the event a WebSocket client gets."""
        ...


class Audience:
    """Who hears a call's session: its own dialect, and any guests (a sideband speaking
    the other OpenAI dialect), each wording the same messages for its own listeners."""

    def __init__(self, dialect: Callable[[SessionMessage], None]) -> None:
        self._dialect = dialect
        self._guests: list[Dialect] = []

    def deliver(self, message: SessionMessage) -> None:
        self._dialect(message)
        for guest in list(self._guests):
            guest.deliver(message)

    def join(self, guest: Dialect) -> None:
        self._guests.append(guest)

    def leave(self, guest: Dialect) -> None:
        if guest in self._guests:
            self._guests.remove(guest)

    def call_ended(self, code: str, message: str) -> None:
        for guest in self._guests:
            guest.call_ended(code, message)


# Makes a call's dialect, given its event channel and its session id.
DialectMaker = Callable[[EventChannel, str], EventDialect]


# A call's session config (from its client secret, its offer), as routes hand it over.
CallConfig = OptionChanges


def configure(session: Session, changes: Sequence[CallConfig]) -> None:
    """A call's session config, before it starts (SignallingError naming what it cannot
    take)."""
    for change in changes:
        with refused_as_signalling():
            session.configure(change)


@contextlib.contextmanager
def refused_as_signalling() -> Iterator[None]:
    """A session config refused (OptionError) as the SignallingError a route answers 400
    with, naming the Realtime parameter at fault."""
    try:
        yield
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
    # The client secret that made the call: only it, or the server's key, may control it.
    # None: made with the server's key, or with no key set.
    owner: object | None = None
    audience: Audience | None = None  # set when it starts

    def controllable_by(self, caller: object | None) -> bool:
        """`caller`: the client secret a request came with; None for the server's key."""
        return caller is None or caller is self.owner

    def request_stop(self, reason: str) -> None:
        self.stop_reason = self.stop_reason or reason
        self.stop.set()

    async def until_connected(self, timeout_s: float) -> bool:
        """False if the peer did not connect in time, or the call was hung up meanwhile
        (a WHIP DELETE or a SIP CANCEL frees the slot at once, not after the timeout)."""
        connecting = spawn(self.transport.wait_connected(timeout_s), f"{self.session.id}:connect")
        stopped = asyncio.create_task(self.stop.wait(), name=f"{self.session.id}:stop")
        try:
            await asyncio.wait({connecting, stopped}, return_when="FIRST_COMPLETED")
        finally:
            stopped.cancel()
            await cancel_task(connecting)
        return connecting.done() and not connecting.cancelled() and connecting.result()

    async def watch(self, pool: PoolSettings) -> str:
        """Wait for the call to end; return why.

        Sleeps until the stop is asked for, the peer goes, or the nearest clock
        runs out; a clock that moved meanwhile (new audio, new speech) is simply
        waited for again.
        """
        stopped = asyncio.create_task(self.stop.wait(), name=f"{self.session.id}:stop")
        gone = asyncio.create_task(self.transport.ended.wait(), name=f"{self.session.id}:gone")
        try:
            while True:
                reason, deadline = self._next_clock(pool)
                wait_s = deadline - time.monotonic()
                if wait_s <= 0:
                    return reason
                await asyncio.wait({stopped, gone}, timeout=wait_s, return_when="FIRST_COMPLETED")
                if self.stop.is_set():
                    return self.stop_reason or "hangup"
                if self.transport.ended.is_set():
                    return "peer_closed"
        finally:
            stopped.cancel()
            gone.cancel()

    def _next_clock(self, pool: PoolSettings) -> tuple[str, float]:
        """The clock that runs out first, and when (time.monotonic)."""
        clocks = [
            ("idle_timeout", self.session.last_active_at + pool.idle_timeout_s),
            ("session_expired", self.started + pool.max_session_s),
        ]
        if self.transport.watches_media:
            heard = self.transport.last_input_at() or self.started
            clocks.append(("media_timeout", heard + pool.media_timeout_s))
        return min(clocks, key=lambda clock: clock[1])

    def usage(self, *, ended: bool = False) -> SessionUsage:
        now = time.time()
        started_at = now - (time.monotonic() - self.started)
        ended_at = now if ended else None
        return SessionUsage(
            self.session.id, self.slot.transport or "", started_at, self.session.usage, ended_at
        )
