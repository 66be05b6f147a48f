"""Binds a transport peer, a pool slot and a Session into one call, and ends it cleanly."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import time
from dataclasses import dataclass, field
from typing import Any, Protocol

from starlette.websockets import WebSocket

from app import events
from app.config import Settings
from app.engines import Engines, load_engines
from app.errors import NotReady, SignallingError
from app.rtc.peer import RtcPeer
from app.session.options import OptionError
from app.session.pool import Slot, SlotPool
from app.session.session import Session
from app.tasks import spawn
from app.ws.transport import WsTransport

log = logging.getLogger(__name__)


# Why a call ended, as sent to the client in the final `error` event's code.
ENDINGS = {
    "connect_timeout": "the peer did not connect in time",
    "media_timeout": "no audio arrived from the peer",
    "idle_timeout": "nobody spoke for too long",
    "session_expired": "the session reached its maximum duration",
    "hangup": "the call was hung up",
    "shutdown": "the server is shutting down",
}
# How often the supervisor looks at a call's clocks.
WATCH_INTERVAL_S = 0.25


class Transport(Protocol):
    """How a call reaches its client: a WebRTC peer or a WebSocket."""

    ended: asyncio.Event
    watches_media: bool  # silence on the wire means the client is gone

    async def wait_connected(self, timeout_s: float) -> bool: ...

    def last_input_at(self) -> float | None: ...

    def send(self, event: events.Event) -> None: ...

    async def flush(self, timeout_s: float) -> None: ...

    async def close(self) -> None: ...


@dataclass(slots=True)
class Call:
    slot: Slot
    transport: Transport
    session: Session
    started: float = field(default_factory=time.monotonic)
    supervisor: asyncio.Task[None] | None = None
    stop_reason: str | None = None
    stop: asyncio.Event = field(default_factory=asyncio.Event)

    def request_stop(self, reason: str) -> None:
        self.stop_reason = self.stop_reason or reason
        self.stop.set()


class CallManager:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.pool = SlotPool(
            settings.pool.max_sessions, settings.pool.retry_after_s, settings.pool.quarantine_s
        )
        self.engines: Engines | None = None
        self.load_error: str | None = None
        self.accepting = True
        self._calls: dict[str, Call] = {}

    @property
    def ready(self) -> bool:
        return self.engines is not None and self.accepting

    @property
    def active_calls(self) -> int:
        return len(self._calls)

    async def load(self) -> None:
        try:
            self.engines = await load_engines(self.settings)
            # The engines live as long as the process: keep the cyclic GC from
            # re-scanning their objects, so the collections below stay sub-ms.
            gc.collect()
            gc.freeze()
        except Exception as exc:
            self.load_error = f"{type(exc).__name__}: {exc}"
            log.exception("engine loading failed; the server stays up but cannot take calls")

    async def open_webrtc(
        self, offer_sdp: str, session_config: dict[str, Any] | None = None
    ) -> tuple[str, str]:
        """Answer an SDP offer on a fresh slot. Returns (answer_sdp, session_id).

        `session_config` is a Realtime session object, applied as a session.update.
        """
        engines = self._engines_or_refuse()
        session_id = events.new_id("sess")
        slot = self.pool.claim(session_id)
        server = self.settings.server
        peer = RtcPeer(session_id, server.ice_servers, dtx=server.opus_dtx)
        try:
            answer = await peer.answer(offer_sdp)
            assert peer.outbound is not None
            session = Session(session_id, self.settings, engines, peer.outbound, peer.send)
            if session_config is not None:
                try:
                    session.configure(session_config)
                except OptionError as exc:
                    raise SignallingError(f"session config: {exc} ({exc.param})") from exc
            peer.bind(session.feed_audio, session.on_events_open, session.on_client_event)
        except BaseException:
            await peer.close()
            self.pool.release(slot)
            raise
        self._start(Call(slot, peer, session))
        return answer, session_id

    async def serve_websocket(self, websocket: WebSocket) -> None:
        """Run one Realtime session on an accepted WebSocket until it ends."""
        engines = self._engines_or_refuse()
        session_id = events.new_id("sess")
        slot = self.pool.claim(session_id)
        transport = WsTransport(websocket, session_id)
        try:
            session = Session(session_id, self.settings, engines, transport.audio, transport.send)
        except BaseException:
            self.pool.release(slot)
            raise
        transport.start(session.on_client_event)
        session.on_events_open()
        call = self._start(Call(slot, transport, session))
        assert call.supervisor is not None
        await asyncio.wait([call.supervisor])

    def _start(self, call: Call) -> Call:
        self._calls[call.session.id] = call
        call.session.start()
        call.supervisor = spawn(self._supervise(call), f"{call.session.id}:call")
        log.info("call started on slot %d", call.slot.index, extra={"session_id": call.session.id})
        return call

    def _engines_or_refuse(self) -> Engines:
        if not self.accepting:
            raise NotReady("server is shutting down")
        if self.engines is None:
            raise NotReady(self.load_error or "engines are still loading")
        return self.engines

    async def _supervise(self, call: Call) -> None:
        reason = "peer_closed"
        try:
            if not await call.transport.wait_connected(self.settings.pool.connect_timeout_s):
                reason = call.stop_reason or "connect_timeout"
                return
            self.pool.activate(call.slot)
            reason = await self._watch(call)
        finally:
            await self._end(call, reason)

    async def _watch(self, call: Call) -> str:
        """Wait for the call to end; return why."""
        pool = self.settings.pool
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(call.stop.wait(), WATCH_INTERVAL_S)
            now = time.monotonic()
            transport = call.transport
            if call.stop.is_set():
                return call.stop_reason or "hangup"
            if transport.ended.is_set():
                return "peer_closed"
            heard = transport.last_input_at() or call.started
            if transport.watches_media and now - heard > pool.media_timeout_s:
                return "media_timeout"
            if now - call.session.last_speech_at > pool.idle_timeout_s:
                return "idle_timeout"
            if now - call.started > pool.max_session_s:
                return "session_expired"

    async def _end(self, call: Call, reason: str) -> None:
        """Drain, then free the slot: cancel the work, tell the client, close the peer."""
        session_id = call.session.id
        log.info("call ending: %s", reason, extra={"session_id": session_id})
        self.pool.drain(call.slot)
        # Stop the session's work first, so nothing of it follows the final event.
        stuck = list(await call.session.close())
        if reason in ENDINGS:
            call.transport.send(
                events.error(ENDINGS[reason], type_="invalid_request_error", code=reason)
            )
            await call.transport.flush(timeout_s=0.5)
        try:
            await asyncio.wait_for(call.transport.close(), self.settings.pool.drain_timeout_s)
        except TimeoutError:
            stuck.append(f"{session_id}:peer-close")
        self._calls.pop(session_id, None)
        # aiortc's peer objects form reference cycles that hold PyAV codecs and
        # resampler graphs, each with native threads; free them now, not at
        # some distant full collection (the leak test saw ~0.4 threads per call).
        gc.collect()
        if stuck:
            self.pool.quarantine(call.slot, stuck)
        else:
            self.pool.release(call.slot)

    async def hang_up(self, session_id: str) -> bool:
        call = self._calls.get(session_id)
        if call is None:
            return False
        call.request_stop("hangup")
        if call.supervisor is not None:
            await asyncio.wait([call.supervisor])
        return True

    async def shutdown(self) -> None:
        """Refuse new calls, end every call with a final event, release the engines.

        Runs twice on a signal (our handler, then the app's lifespan): the second is quick.
        """
        self.accepting = False
        calls = list(self._calls.values())
        for call in calls:
            call.request_stop("shutdown")
        supervisors = [call.supervisor for call in calls if call.supervisor is not None]
        if supervisors:
            await asyncio.wait(supervisors, timeout=self.settings.pool.drain_timeout_s + 1)
        self.pool.close()
        engines, self.engines = self.engines, None
        if engines is not None:
            await engines.aclose()
