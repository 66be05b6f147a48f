"""Binds a transport peer, a pool slot and a Session into one call, and ends it cleanly."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any

from app import events
from app.config import Settings
from app.engines import Engines, load_engines
from app.errors import NotReady
from app.rtc.peer import RtcPeer
from app.session.pool import Slot, SlotPool
from app.session.session import Session
from app.tasks import cancel_task, spawn

log = logging.getLogger(__name__)


@dataclass(slots=True)
class Call:
    slot: Slot
    peer: RtcPeer
    session: Session
    supervisor: asyncio.Task[None] | None = None


class CallManager:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.pool = SlotPool(settings.pool.max_sessions, settings.pool.retry_after_s)
        self.engines: Engines | None = None
        self.load_error: str | None = None
        self.accepting = True
        self._calls: dict[str, Call] = {}

    @property
    def ready(self) -> bool:
        return self.engines is not None and self.accepting

    async def load(self) -> None:
        try:
            self.engines = await load_engines(self.settings)
        except Exception as exc:
            self.load_error = f"{type(exc).__name__}: {exc}"
            log.exception("engine loading failed; the server stays up but cannot take calls")

    async def open_webrtc(self, offer_sdp: str) -> tuple[str, str]:
        """Answer an SDP offer on a fresh slot. Returns (answer_sdp, session_id)."""
        if not self.accepting:
            raise NotReady("server is shutting down")
        if self.engines is None:
            raise NotReady(self.load_error or "engines are still loading")
        session_id = events.new_id("sess")
        slot = self.pool.claim(session_id)
        peer = RtcPeer(session_id, self.settings.server.ice_servers)
        try:
            answer = await peer.answer(offer_sdp)
            assert peer.outbound is not None
            session = Session(
                session_id, self.settings, self.engines, peer.outbound, peer.events.send
            )
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
        try:
            if not await call.peer.wait_connected(self.settings.pool.connect_timeout_s):
                log.warning(
                    "peer never connected; freeing slot", extra={"session_id": call.session.id}
                )
                return
            self.pool.activate(call.slot)
            await call.peer.ended.wait()
        finally:
            await self._end(call)

    async def _end(self, call: Call) -> None:
        await call.session.close()
        await call.peer.close()
        self._calls.pop(call.session.id, None)
        self.pool.release(call.slot)

    async def hang_up(self, session_id: str) -> bool:
        call = self._calls.get(session_id)
        if call is None:
            return False
        await call.peer.close()  # the supervisor sees `ended` and finishes the call
        return True

    def describe(self) -> dict[str, Any]:
        return self.pool.snapshot()

    async def shutdown(self) -> None:
        self.accepting = False
        calls = list(self._calls.values())
        for call in calls:
            call.peer.events.send(
                events.error("server shutting down", type_="server_error", code="shutdown")
            )
        await asyncio.gather(*(call.peer.close() for call in calls), return_exceptions=True)
        await asyncio.gather(*(cancel_task(call.supervisor, 5.0) for call in calls))
        if self.engines is not None:
            await self.engines.aclose()
