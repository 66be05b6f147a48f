"""Binds a transport, a dialect, a pool slot and a Session into one call, and ends it cleanly.

A call is made of (app/call.py):
- a transport, how the client is reached: an aiortc peer (/offer, Realtime calls,
  WHIP), a WebSocket (Realtime, media streams), a SIP leg (plain RTP);
- a dialect, how the client talks: the OpenAI Realtime events (app/realtime) or a
  carrier's media stream (app/mediastream); it drives the Session with verbs and words
  its messages;
- the Session, the conversation itself, on a slot of the pool.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import math
from collections.abc import Callable, Sequence

from starlette.websockets import WebSocket

from app.admission import ANYONE, Caller, RateLimit
from app.audio.g711 import RATE as G711_RATE
from app.call import ENDINGS, Call, configure
from app.config import Settings
from app.engines import Engines, load_engines
from app.engines.turn import SmartTurn, TurnModel
from app.errors import EngineError, NotFound, NotReady, VoiceAgentError
from app.ids import new_id
from app.mediastream.playout import MarkedPlayout
from app.mediastream.twilio import MAX_MESSAGE_BYTES as STREAM_MESSAGE_BYTES
from app.mediastream.twilio import RATE as TWILIO_RATE
from app.mediastream.twilio import TwilioDialect
from app.observability.health import EngineHealth
from app.observability.metrics import Metrics
from app.observability.tracing import TurnTracer
from app.realtime.dialect import RealtimeDialect
from app.realtime.session_config import RATE as REALTIME_RATE
from app.rtc.datachannel import EventChannel
from app.rtc.peer import RtcPeer
from app.session.audio_out import AudioOut
from app.session.interruption import InterruptionStats
from app.session.messages import SessionMessage
from app.session.options import OptionChanges
from app.session.pool import Slot, SlotPool
from app.session.responders import AgentResponder, EchoResponder, Responder
from app.session.session import OutputLevel, Session
from app.session.speculation import SpeculationStats
from app.session.usage import UsageLedger
from app.sip.leg import SipLeg
from app.sip.sdp import AudioOffer
from app.tasks import spawn
from app.ws.playout import SocketPlayout
from app.ws.transport import WsTransport

log = logging.getLogger(__name__)


class CallManager:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.pool = SlotPool(
            settings.pool.max_sessions, settings.pool.retry_after_s, settings.pool.quarantine_s
        )
        self.responder: Responder | None = None  # set once the engines are loaded
        self._engines: Engines | None = None
        self.turn_model: TurnModel | None = None  # semantic_vad, where it could be loaded
        # Over every session since the start.
        self.speculation = SpeculationStats()
        self.interruptions = InterruptionStats()
        self.health = EngineHealth()
        self.metrics = Metrics(
            self.pool, self.speculation, self.interruptions, self.health, agent=settings.agent
        )
        self.usage = UsageLedger()
        self.tracer = (
            TurnTracer.over_otlp(settings.server.otlp_endpoint, replica=settings.server.replica)
            if settings.server.otlp_endpoint
            else None
        )
        self.call_rate = RateLimit.of_calls(settings.limits)
        share = settings.limits.address_slots
        # Slots one unvouched client address may hold at once (0: no limit).
        self._client_slots = 0 if share >= 1 else math.ceil(share * settings.pool.max_sessions)
        self.load_error: str | None = None
        self.accepting = True
        self._calls: dict[str, Call] = {}
        vad = settings.vad
        self._phone_settings = settings.model_copy(
            update={
                "vad": vad.model_copy(
                    update={"echo_guard": vad.echo_guard or vad.echo_guard_phones}
                )
            }
        )

    @property
    def ready(self) -> bool:
        return self.responder is not None and self.accepting

    @property
    def active_calls(self) -> int:
        return len(self._calls)

    @property
    def model(self) -> str:
        return self.settings.llm.model or "embedded"

    async def load(self) -> None:
        """Load the engines once for every call, and choose what answers: agent or echo."""
        try:
            responder: Responder
            if self.settings.agent == "echo":
                log.info("agent=echo: no models loaded; utterances are played back")
                responder = EchoResponder()
            else:
                self._engines = await load_engines(self.settings)
                first_words = self.settings.tts.first_chunk_words
                responder = AgentResponder(self._engines, first_chunk_words=first_words)
            self.turn_model = await self._load_turn_model()
            self.responder = responder  # last: calls are taken from now on
            # The engines live as long as the process: keep the cyclic GC from
            # re-scanning their objects, so the collections below stay sub-ms.
            gc.collect()
            gc.freeze()
        except Exception as exc:
            self.load_error = f"{type(exc).__name__}: {exc}"
            log.exception("engine loading failed; the server stays up but cannot take calls")

    async def _load_turn_model(self) -> TurnModel | None:
        """Small and quick to load, so echo sessions get it too."""
        try:
            return await asyncio.to_thread(SmartTurn, self.settings.turn)
        except EngineError as exc:
            if self.settings.turn.detection == "semantic_vad":
                raise
            log.warning("no turn model, so no semantic_vad: %s", exc)
            return None

    async def open_webrtc(
        self,
        offer_sdp: str,
        changes: Sequence[OptionChanges] = (),
        *,
        via: str = "webrtc",
        owner: object | None = None,
        caller: Caller = ANYONE,
    ) -> tuple[str, str]:
        """Answer an SDP offer on a fresh slot; the data channel, if any, speaks Realtime.

        Returns (answer_sdp, session_id). `changes` configure the session first, in order.
        `via` names the signalling in /v1/pool (webrtc, whip); `owner`, the client secret
        that asked (None: the server's key); `caller`, where it came from.
        """
        responder, session_id, slot = self._claim(via, caller)
        server = self.settings.server
        peer = RtcPeer(
            session_id,
            server.ice_config(),
            dtx=server.opus_dtx,
            event_bytes=self.settings.limits.event_bytes,
        )
        try:
            answer = await peer.answer(offer_sdp)
            assert peer.outbound is not None
            dialect = RealtimeDialect(peer.events, model=self.model, webrtc=True)
            session = self._session(
                session_id,
                responder,
                peer.outbound,
                dialect.deliver,
                output_level=peer.outbound.output_level_db,
                phone=peer.outbound.rate == G711_RATE,  # a G.711 leg is a phone line
            )
            dialect.attach(session)
            configure(session, changes)
            peer.bind(session.push_audio, dialect.opened, dialect.receive)
        except BaseException:
            await peer.close()
            self.pool.release(slot)
            raise
        self._start(Call(slot, peer, dialect, session, owner=owner))
        return answer, session_id

    async def serve_websocket(
        self,
        websocket: WebSocket,
        changes: Sequence[OptionChanges] = (),
        *,
        owner: object | None = None,
        caller: Caller = ANYONE,
    ) -> None:
        """Run one Realtime session on an accepted WebSocket until it ends."""
        responder, session_id, slot = self._claim("websocket", caller)
        transport = WsTransport(
            websocket, session_id, max_message_bytes=self.settings.limits.ws_message_bytes
        )
        dialect = RealtimeDialect(
            transport,
            model=self.model,
            webrtc=False,
            max_append_s=self.settings.limits.append_audio_s,
        )

        async def push(pcm: bytes) -> None:
            await transport.send_when_room(dialect.audio_delta(pcm))

        try:
            playout = SocketPlayout(session_id, REALTIME_RATE, push)
            session = self._session(session_id, responder, playout, dialect.deliver)
            configure(session, changes)
        except BaseException:
            self.pool.release(slot)
            raise
        dialect.attach(session)
        transport.start(dialect.receive_in_steps)
        dialect.opened()
        await self._run(Call(slot, transport, dialect, session, owner=owner))

    async def serve_media_stream(self, websocket: WebSocket, caller: Caller = ANYONE) -> None:
        """Run one phone call from a Twilio-style media stream on an accepted WebSocket."""
        responder, session_id, slot = self._claim("media_stream", caller)
        transport = WsTransport(
            websocket,
            session_id,
            max_message_bytes=STREAM_MESSAGE_BYTES,
            heard_at=lambda: dialect.last_media_at,
        )
        dialect = TwilioDialect(transport)
        try:
            playout = MarkedPlayout(session_id, TWILIO_RATE, dialect.send_media, dialect.send_mark)
            session = self._session(
                session_id,
                responder,
                playout,
                dialect.deliver,
                output_level=playout.output_level_db,
                phone=True,
            )
        except BaseException:
            self.pool.release(slot)
            raise
        dialect.attach(session, playout)
        transport.start(dialect.receive)
        await self._run(Call(slot, transport, dialect, session))

    async def open_sip(self, offer: AudioOffer, host: str, caller: Caller = ANYONE) -> SipLeg:
        """A SIP call answered on a fresh slot: RTP on `host`, the leg's port for the answer.

        It has no event channel of its own; a sideband controller hears its events.
        """
        responder, session_id, slot = self._claim("sip", caller)
        leg = SipLeg(session_id, offer)
        try:
            dialect = RealtimeDialect(EventChannel(session_id), model=self.model, webrtc=True)
            session = self._session(
                session_id,
                responder,
                leg.outbound,
                dialect.deliver,
                output_level=leg.outbound.output_level_db,
                phone=True,
            )
            dialect.attach(session)
            await leg.open(host, session.push_audio, session.press)
        except BaseException:
            await leg.close()
            self.pool.release(slot)
            raise
        self._start(Call(slot, leg, dialect, session))
        return leg

    def _session(
        self,
        session_id: str,
        responder: Responder,
        audio: AudioOut,
        deliver: Callable[[SessionMessage], None],
        output_level: OutputLevel | None = None,
        *,
        phone: bool = False,
    ) -> Session:
        """`phone`: a call from a phone line, where echo cancellation cannot be assumed."""
        return Session(
            session_id,
            self._phone_settings if phone else self.settings,
            responder,
            audio,
            self._observed(session_id, deliver),
            output_level=output_level,
            turn_model=self.turn_model,
            speculation=self.speculation,
            interruptions=self.interruptions,
        )

    def _observed(
        self, session_id: str, deliver: Callable[[SessionMessage], None]
    ) -> Callable[[SessionMessage], None]:
        """`deliver`, with each message counted (/metrics), traced and weighed for engine
        health on its way."""
        metrics, tracer, health = self.metrics, self.tracer, self.health

        def observed(message: SessionMessage) -> None:
            metrics.saw(message)
            health.saw(message)
            if tracer is not None:
                tracer.saw(session_id, message)
            deliver(message)

        return observed

    async def _run(self, call: Call) -> None:
        """Start a call whose socket this request holds, and hold it until the call ends."""
        supervisor = self._start(call).supervisor
        assert supervisor is not None
        await asyncio.wait([supervisor])

    def peer_of(self, call_id: str, via: str, caller: object | None = None) -> RtcPeer:
        """The WebRTC peer of a live call that came `via` this signalling and that
        `caller` (a client secret; None: the server's key) may control; else NotFound."""
        call = self._calls.get(call_id)
        if (
            call is None
            or call.slot.transport != via
            or not isinstance(call.transport, RtcPeer)
            or not call.controllable_by(caller)
        ):
            raise NotFound(f"no {via} call {call_id!r}")
        return call.transport

    def _claim(self, via: str, caller: Caller) -> tuple[Responder, str, Slot]:
        """What every new call starts with: the responder (or a refusal), an id, a slot.

        A caller that is not vouched for is held to its address's rate of new calls
        and share of the slots (RateLimited, AddressLimitReached).
        """
        try:
            responder = self._responder_or_refuse()
            session_id = self._new_session_id()
            if caller.limited:
                assert caller.address is not None
                self.call_rate.take(caller.address)
                slot = self.pool.claim(session_id, via, caller.address, self._client_slots)
            else:
                slot = self.pool.claim(session_id, via)
        except VoiceAgentError as exc:
            self.metrics.refused(via, exc.outcome or exc.type)
            raise
        self.metrics.accepted(via)
        return responder, session_id, slot

    def _new_session_id(self) -> str:
        replica = self.settings.server.replica
        return new_id(f"sess_{replica}" if replica else "sess")

    async def control(self, call_id: str, websocket: WebSocket) -> None:
        """Sideband: a server-side controller on an accepted WebSocket hears a WebRTC
        call's events and sends its own, until it leaves or the call ends.

        Takes no slot: the call has one. Raises NotFound for an unknown call.
        """
        call = self._calls.get(call_id)
        if call is None or not isinstance(call.dialect, RealtimeDialect):
            raise NotFound(f"no call {call_id!r} to control")
        dialect, supervisor = call.dialect, call.supervisor
        controller = WsTransport(
            websocket,
            f"{call_id}:sideband",
            max_message_bytes=self.settings.limits.ws_message_bytes,
        )
        dialect.watch(controller)
        controller.start(lambda data: dialect.receive_in_steps(data, controller))
        left = asyncio.create_task(controller.ended.wait(), name=f"{call_id}:sideband-wait")
        try:
            await asyncio.wait(
                [t for t in (left, supervisor) if t is not None], return_when="FIRST_COMPLETED"
            )
            await controller.flush(timeout_s=0.5)  # the call's last event, if it ended
        finally:
            left.cancel()
            dialect.unwatch(controller)
            await controller.close()

    def _start(self, call: Call) -> Call:
        self._calls[call.session.id] = call
        call.session.start()
        call.supervisor = spawn(self._supervise(call), f"{call.session.id}:call")
        log.info("call started on slot %d", call.slot.index, extra={"session_id": call.session.id})
        return call

    def _responder_or_refuse(self) -> Responder:
        if not self.accepting:
            raise NotReady("server is shutting down")
        if self.responder is None:
            raise NotReady(self.load_error or "engines are still loading")
        return self.responder

    async def _supervise(self, call: Call) -> None:
        reason = "peer_closed"
        try:
            if not await call.until_connected(self.settings.pool.connect_timeout_s):
                reason = call.stop_reason or "connect_timeout"
                return
            self.pool.activate(call.slot)
            reason = await call.watch(self.settings.pool)
        finally:
            await self._end(call, reason)

    async def _end(self, call: Call, reason: str) -> None:
        """Drain, then free the slot: cancel the work, tell the client, close the peer."""
        session_id = call.session.id
        log.info("call ending: %s", reason, extra={"session_id": session_id})
        self.pool.drain(call.slot)
        # Stop the session's work first, so nothing of it follows the final event.
        stuck = list(await call.session.close())
        self.usage.ended(call.usage(ended=True))
        if reason in ENDINGS:
            call.dialect.call_ended(reason, ENDINGS[reason])
            await call.transport.flush(timeout_s=0.5)
        try:
            async with asyncio.timeout(self.settings.pool.drain_timeout_s):
                await call.transport.close()
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

    def usage_report(self) -> dict[str, object]:
        return self.usage.report([call.usage() for call in self._calls.values()])

    async def hang_up(self, session_id: str, caller: object | None = None) -> bool:
        """End a live call that `caller` (a client secret; None: the server's key) may
        control; False when there is none (another's call is not told apart from none)."""
        call = self._calls.get(session_id)
        if call is None or not call.controllable_by(caller):
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
        self.responder = None
        if self.turn_model is not None:
            self.turn_model.close()
            self.turn_model = None
        engines, self._engines = self._engines, None
        if engines is not None:
            await engines.aclose()
        tracer, self.tracer = self.tracer, None
        if tracer is not None:
            await asyncio.to_thread(tracer.shutdown)  # the last turns' spans go out
