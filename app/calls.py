"""Binds a transport peer, a pool slot and a Session into one call, and ends it cleanly."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import time
from dataclasses import dataclass, field
from typing import Any

from app import events
from app.config import Settings
from app.engines import Engines, load_engines
from app.errors import NotReady, SignallingError
from app.rtc.peer import RtcPeer
from app.session.options import OptionError
from app.session.pool import Slot, SlotPool
from app.session.session import Session
from app.tasks import spawn

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


@dataclass(slots=True)
class Call:
    slot: Slot
    peer: RtcPeer
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
        if not self.accepting:
            raise NotReady("server is shutting down")
        if self.engines is None:
            raise NotReady(self.load_error or "engines are still loading")
        session_id = events.new_id("sess")
        slot = self.pool.claim(session_id)
        server = self.settings.server
        peer = RtcPeer(session_id, server.ice_servers, dtx=server.opus_dtx)
        try:
            answer = await peer.answer(offer_sdp)
            assert peer.outbound is not None
            session = Session(
                session_id, self.settings, self.engines, peer.outbound, peer.events.send
            )
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
        call = Call(slot, peer, session)
        self._calls[session_id] = call
        session.start()
        call.supervisor = spawn(self._supervise(call), f"{session_id}:call")
        log.info("call answered on slot %d", slot.index, extra={"session_id": session_id})
        return answer, session_id

    async def _supervise(self, call: Call) -> None:
        reason = "peer_closed"
        try:
            if not await call.peer.wait_connected(self.settings.pool.connect_timeout_s):
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
            heard = call.peer.inbound.last_frame_at if call.peer.inbound else None
            if call.stop.is_set():
                return call.stop_reason or "hangup"
            if call.peer.ended.is_set():
                return "peer_closed"
            if now - (heard or call.started) > pool.media_timeout_s:
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
            call.peer.events.send(
                events.error(ENDINGS[reason], type_="invalid_request_error", code=reason)
            )
            await call.peer.events.flush(timeout_s=0.5)
        try:
            await asyncio.wait_for(call.peer.close(), self.settings.pool.drain_timeout_s)
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
