"""Claims a slot for each call, supervises it, and ends it cleanly.

A call is made of (call.py):
- a transport, how the client is reached: an aiortc peer (/offer, Realtime calls,
  WHIP), a WebSocket (Realtime, media streams), a SIP leg (plain RTP);
- a dialect, how the client talks: the OpenAI Realtime events (app/realtime) or a
  carrier's media stream (app/telephony/mediastream); it drives the Session with verbs and words
  its messages;
- the Session, the conversation itself, on a slot of the pool.

One small builder per way in puts these together (webrtc.py, websocket.py, phone.py;
sideband.py joins a call that exists); this is what they share.
"""

from __future__ import annotations

import asyncio
import gc
import logging
from collections.abc import Callable

from app.agent.responders import Responder
from app.audio.echo import EchoReference, Played
from app.calls.admission import Caller, RateLimit, address_share, is_loopback
from app.calls.call import ENDINGS, Audience, Call, CallConfig, refused_as_signalling
from app.calls.incoming import IncomingCalls
from app.calls.pool import Slot, SlotPool
from app.calls.recordings import RecordingStore
from app.calls.seats import SidebandSeats
from app.errors import NotFound, NotReady, VoiceAgentError
from app.ids import new_id, shown
from app.rtc.peer import RtcPeer
from app.runtime import Runtime
from app.session.messages import SessionMessage
from app.session.options import SessionOptions, changed_options
from app.session.refusals import OptionError
from app.session.session import OutputLevel, Session
from app.session.speaking.audio_out import AudioOut
from app.tasks import spawn

log = logging.getLogger(__name__)


class CallManager:
    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.settings = settings = runtime.settings
        pool = settings.pool
        self.pool = SlotPool(pool.max_sessions, pool.retry_after_s, pool.quarantine_s)
        runtime.metrics.count_slots(self.pool)
        self.call_rate = RateLimit.of_calls(settings.limits)
        # Slots one unvouched client address may hold at once (0: no limit).
        self._client_slots = address_share(settings.limits, pool.max_sessions)
        self.accepting = True
        self._calls: dict[str, Call] = {}
        self._audiences: dict[str, Audience] = {}  # made with a session, until it starts
        self.recordings = RecordingStore(settings.recordings)
        self.incoming = IncomingCalls(settings.sip)
        self.sidebands = SidebandSeats(settings.limits.call_sidebands,
                                       settings.limits.address_sidebands)  # fmt: skip
        vad = settings.vad
        echo_guard = vad.echo_guard or vad.echo_guard_phones
        audio = settings.audio
        cancel = audio.echo_cancellation or audio.echo_cancellation_phones
        self._phone_settings = settings.model_copy(
            update={
                "vad": vad.model_copy(update={"echo_guard": echo_guard}),
                "audio": audio.model_copy(update={"echo_cancellation": cancel}),
            }
        )

    @property
    def ready(self) -> bool:
        return self.runtime.responder is not None and self.accepting

    @property
    def active_calls(self) -> int:
        return len(self._calls)

    # --- what the builders use

    def claim(
        self, via: str, caller: Caller, session_id: str | None = None
    ) -> tuple[Responder, str, Slot]:
        """What every new call starts with: the responder (or a refusal), an id (a new
        one, unless the call was given its own while it rang), a slot.

        A caller that is not vouched for is held to its address's rate of new calls
        and share of the slots (RateLimited, AddressLimitReached).
        """
        try:
            if not self.accepting:
                raise NotReady("server is shutting down")
            responder = self.runtime.answering()
            session_id = session_id or self.new_session_id()
            if self.limits_apply(caller):
                assert caller.address is not None
                self.call_rate.take(caller.address)
                slot = self.pool.claim(session_id, via, caller.address, self._client_slots)
            else:
                slot = self.pool.claim(session_id, via)
        except VoiceAgentError as exc:
            self.runtime.metrics.refused(via, exc.outcome or exc.type)
            raise
        self.runtime.metrics.accepted(via)
        return responder, session_id, slot

    def limits_apply(self, caller: Caller) -> bool:
        """Whether `caller` is held to an address's rate and share of the slots."""
        if not caller.limited or caller.address is None:
            return False
        return not (self.settings.limits.loopback_exempt and is_loopback(caller.address))

    def session(
        self,
        session_id: str,
        responder: Responder,
        audio: AudioOut,
        deliver: Callable[[SessionMessage], None],
        output_level: OutputLevel | None = None,
        *,
        phone: bool = False,
        played: Played | None = None,
    ) -> Session:
        """`phone`: a call from a phone line, where echo cancellation cannot be assumed.
        `played`: the playout that paces the reply, whose echo can then be cancelled."""
        runtime = self.runtime
        settings = self._phone_settings if phone else self.settings
        reference = None
        if played is not None and settings.audio.echo_cancellation:
            reference = played.reference = EchoReference(played.rate)
            # The guard holds the echo off while the canceller converges (then it rests).
            guarded = settings.vad.model_copy(update={"echo_guard": True})
            settings = settings.model_copy(update={"vad": guarded})
        audience = self._audiences[session_id] = Audience(deliver)
        return Session(
            session_id,
            settings,
            responder,
            audio,
            runtime.observed(session_id, audience.deliver),
            output_level=output_level,
            reference=reference,
            turn_model=runtime.turn_model,
            voice_model=runtime.voice_model,
            speculation=runtime.speculation,
            interruptions=runtime.interruptions,
            tools=runtime.tools,
        )

    def abandon(self, slot: Slot) -> None:
        """A call that failed before it started: its slot is free again."""
        if slot.session_id is not None:
            self._audiences.pop(slot.session_id, None)
        self.pool.release(slot)

    def start(self, call: Call) -> Call:
        self._calls[call.session.id] = call
        call.audience = self._audiences.pop(call.session.id, None)
        call.session.start()
        call.supervisor = spawn(self._supervise(call), f"{call.session.id}:call")
        log.info("call started on slot %d", call.slot.index, extra={"session_id": call.session.id})
        return call

    async def run(self, call: Call) -> None:
        """Start a call whose socket this request holds, and hold it until the call ends."""
        supervisor = self.start(call).supervisor
        assert supervisor is not None
        await asyncio.wait([supervisor])

    def find(self, call_id: str) -> Call | None:
        return self._calls.get(call_id)

    def stop(self, call_id: str, reason: str) -> None:
        """Ask a live call to end (its client asked: a reason from ENDINGS)."""
        call = self._calls.get(call_id)
        if call is not None:
            call.request_stop(reason)

    def preview(self, changes: CallConfig | None) -> SessionOptions:
        """The options a new call's session would have with `changes` (SignallingError if
        it could not take them): a client secret's session config is checked when minted,
        not at every call made with it."""
        runtime = self.runtime
        fresh = SessionOptions.from_settings(self.settings)
        if changes is None:
            return fresh
        with refused_as_signalling():
            options = changed_options(
                fresh, changes, self.settings, runtime.responder, runtime.turn_model
            )
            for spec in options.servers:
                if (refused := runtime.tools.refused(spec)) is not None:
                    raise OptionError(refused, "tools")
            return options

    # --- what routes ask of live calls

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
            raise NotFound(f"no {via} call {shown(call_id)}")
        return call.transport

    def usage_report(self) -> dict[str, object]:
        return self.runtime.usage.report([call.usage() for call in self._calls.values()])

    async def hang_up(
        self, session_id: str, caller: object | None = None, *, reason: str = "hangup"
    ) -> bool:
        """End a live call that `caller` (a client secret; None: the server's key) may
        control; False when there is none (another's call is not told apart from none).
        `reason`: peer_closed where the other side hung up (a SIP BYE)."""
        call = self._calls.get(session_id)
        if call is None or not call.controllable_by(caller):
            return False
        call.request_stop(reason)
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
        self.recordings.close()
        await self.incoming.close()
        await self.runtime.close()

    # --- a call's life

    def new_session_id(self) -> str:
        replica = self.settings.server.replica
        return new_id(f"sess_{replica}" if replica else "sess")

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
        self.runtime.usage.ended(call.usage(ended=True))
        recording = call.session.recording
        if recording is not None:
            await self.recordings.keep(session_id, recording)
        # Every ending is told (a sideband hears that the caller hung up); the client is
        # waited for only where it is still there to hear it.
        message = ENDINGS.get(reason, "")
        call.dialect.call_ended(reason, message)
        if call.audience is not None:
            call.audience.call_ended(reason, message)
        if reason in ENDINGS:
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
