"""Phone calls: a carrier's media stream (Twilio's protocol, on a WebSocket), and SIP
(plain RTP on a leg of its own). The echo guard is on for both: no echo cancellation
can be assumed on a phone line."""

from __future__ import annotations

from collections.abc import Callable

from starlette.websockets import WebSocket

from app.calls.admission import ANYONE, Caller, address_share
from app.calls.call import Call, CallConfig, DialectMaker, configure
from app.calls.live import changes_of, live_dialect
from app.calls.manager import CallManager
from app.calls.webrtc import realtime_over_webrtc
from app.errors import (
    AddressLimitReached,
    BadRequest,
    Forbidden,
    NotFound,
    NotReady,
    SessionLimitReached,
    VoiceAgentError,
)
from app.events.channel import NoChannel
from app.ids import shown
from app.live.dialect import LiveDialect
from app.telephony.mediastream.playout import MarkedPlayout
from app.telephony.mediastream.twilio import MAX_MESSAGE_BYTES, RATE, TwilioDialect
from app.telephony.sip.leg import Invite, SipLeg
from app.telephony.sip.sdp import AudioOffer
from app.telephony.sip.transfer import allowed_target, valid_target
from app.ws.transport import WsTransport


async def serve_media_stream(
    calls: CallManager, websocket: WebSocket, caller: Caller = ANYONE
) -> None:
    """Run one phone call from a Twilio-style media stream on an accepted WebSocket."""
    responder, session_id, slot = calls.claim("media_stream", caller)
    transport = WsTransport(
        websocket,
        session_id,
        max_message_bytes=MAX_MESSAGE_BYTES,
        heard_at=lambda: dialect.last_media_at,
    )
    dialect = TwilioDialect(transport)
    try:
        playout = MarkedPlayout(session_id, RATE, dialect.send_media, dialect.send_mark)
        session = calls.session(
            session_id,
            responder,
            playout,
            dialect.deliver,
            output_level=playout.output_level_db,
            phone=True,
            played=playout.clock,
        )
    except BaseException:
        calls.abandon(slot)
        raise
    dialect.attach(session, playout)
    transport.start(dialect.receive)
    await calls.run(Call(slot, transport, dialect, session))


class SipCalls:
    """What the SIP endpoint (app/telephony/sip/server.py) asks of the calls."""

    def __init__(self, calls: CallManager) -> None:
        self._calls = calls
        settings = calls.settings
        self._share = address_share(settings.limits, settings.pool.max_sessions)

    async def answer_sip(
        self, offer: AudioOffer, caller: Caller, invite: Invite, holding: int = 0
    ) -> SipLeg:
        """A leg for a call that may be answered, holding nothing yet: `caller` is within
        its address's rate (this call counted) and share (`holding`: its SIP calls,
        ringing, answered or up), and a slot is free. With a webhook set, the call rings
        until the application accepts it (a Live session, with its config) or rejects it
        (CallRejected); the rate and share are checked before it rings.

        The leg's slot and session are claimed at the ACK (`leg.claim`): a forged
        source, which never ACKs, holds none. The call has no event channel of its own;
        a sideband controller hears its events.
        """
        calls = self._calls
        session_id = calls.new_session_id()
        self._admit(caller, holding)
        make: DialectMaker = realtime_over_webrtc(calls.runtime.model)
        changes: list[CallConfig] = []
        if calls.incoming.offered:
            invite.ringing()
            config = await calls.incoming.offer(session_id, invite.headers)
            make = live_dialect(calls, config, websocket=False)
            changes = [changes_of(calls, config)]
            self._refused_unless(self._free_slot)  # rang a while: busy, not answered then hung up
        leg = SipLeg(session_id, offer)
        leg.claim = lambda: self._start(leg, caller, make, changes)
        return leg

    def _admit(self, caller: Caller, holding: int) -> None:
        calls = self._calls

        def admitted() -> None:
            if not calls.accepting:
                raise NotReady("server is shutting down")
            calls.runtime.answering()
            if calls.limits_apply(caller):
                assert caller.address is not None
                calls.call_rate.take(caller.address)
                if self._share and holding >= self._share:
                    retry_after_s = calls.pool.retry_after_s
                    raise AddressLimitReached(caller.address, self._share, retry_after_s)
            self._free_slot()

        self._refused_unless(admitted)

    def _free_slot(self) -> None:
        pool = self._calls.pool
        if not pool.has_free:
            raise SessionLimitReached(pool.size, pool.retry_after_s)

    def _refused_unless(self, check: Callable[[], None]) -> None:
        try:
            check()
        except VoiceAgentError as exc:
            self._calls.runtime.metrics.refused("sip", exc.outcome or exc.type)
            raise

    def _start(
        self, leg: SipLeg, caller: Caller, make: DialectMaker, changes: list[CallConfig]
    ) -> None:
        """The caller ACKed: the call's slot (its address's share checked again, now
        with every way in counted), its session, and its start."""
        calls = self._calls
        if calls.limits_apply(caller):
            assert caller.address is not None
            calls.call_rate.refund(caller.address)  # counted when it came: once is enough
        responder, session_id, slot = calls.claim("sip", caller, leg.session_id)
        try:
            dialect = make(NoChannel(), session_id)
            if isinstance(dialect, LiveDialect):
                dialect.keypad = leg.send_key
            session = calls.session(
                session_id,
                responder,
                leg.outbound,
                dialect.deliver,
                output_level=leg.outbound.output_level_db,
                phone=True,
                played=leg.outbound,
            )
            dialect.attach(session)
            configure(session, changes)
            leg.attach(session.push_audio, session.press)
        except BaseException:
            calls.abandon(slot)
            raise
        calls.start(Call(slot, leg, dialect, session))

    async def hang_up(self, session_id: str, *, caller_left: bool = False) -> bool:
        """End a call: we hung up, or (`caller_left`) the caller did, with a BYE."""
        reason = "peer_closed" if caller_left else "hangup"
        return await self._calls.hang_up(session_id, reason=reason)


async def transfer(calls: CallManager, session_id: str, target: str) -> None:
    """Send a live SIP call to `target` (REFER): BadRequest for a target that is not a
    plain sip:, sips: or tel: URI, Forbidden for one the operator's sip.transfer_targets
    do not list, NotFound for no such SIP call, TransferFailed if the caller's side will
    not."""
    if not valid_target(target):
        raise BadRequest(
            "target_uri: a sip:, sips: or tel: URI of RFC 3261 characters, without spaces, "
            "<>, headers (?), a second URI (,) or maddr"
        )
    patterns = calls.settings.sip.transfer_targets
    if not patterns:
        raise Forbidden("transfers are off: the operator lists none (--sip-transfer-targets)")
    if not allowed_target(target, patterns):
        raise Forbidden(f"{target} is not among the operator's --sip-transfer-targets")
    call = calls.find(session_id)
    leg = call.transport if call is not None else None
    if not isinstance(leg, SipLeg) or leg.transfer is None:
        raise NotFound(f"no SIP call {shown(session_id)} to transfer")
    await leg.transfer(target)
