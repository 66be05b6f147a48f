"""A call over WebRTC (POST /offer, /v1/realtime/calls, WHIP): an aiortc peer, its data
channel speaking the Realtime events, if it opens one."""

from __future__ import annotations

from collections.abc import Sequence

from app.audio.g711 import RATE as G711_RATE
from app.calls.admission import ANYONE, Caller
from app.calls.call import Call, DialectMaker, EventDialect, configure
from app.calls.manager import CallManager
from app.events.channel import EventChannel
from app.realtime.dialect import RealtimeDialect
from app.rtc.peer import RtcPeer
from app.session.options import OptionChanges


async def open_webrtc(
    calls: CallManager,
    offer_sdp: str,
    changes: Sequence[OptionChanges] = (),
    *,
    via: str = "webrtc",
    owner: object | None = None,
    caller: Caller = ANYONE,
    dialect_of: DialectMaker | None = None,
) -> tuple[str, str]:
    """Answer an SDP offer on a fresh slot. Returns (answer_sdp, session_id).

    `changes` configure the session first, in order. `via` names the signalling in
    /v1/pool (webrtc, whip, live); `owner`, the client secret that asked (None: the
    server's key); `caller`, where it came from; `dialect_of`, what its data channel
    speaks (Realtime unless told).
    """
    responder, session_id, slot = calls.claim(via, caller)
    settings = calls.settings
    peer = RtcPeer(
        session_id,
        settings.server.ice_config(),
        dtx=settings.server.opus_dtx,
        event_bytes=settings.limits.event_bytes,
    )
    try:
        answer = await peer.answer(offer_sdp)
        assert peer.outbound is not None
        make = dialect_of or realtime_over_webrtc(calls.runtime.model)
        dialect = make(peer.events, session_id)
        session = calls.session(
            session_id,
            responder,
            peer.outbound,
            dialect.deliver,
            output_level=peer.outbound.output_level_db,
            phone=peer.outbound.rate == G711_RATE,  # a G.711 leg is a phone line
            played=peer.outbound.playout,
        )
        dialect.attach(session)
        configure(session, changes)
        peer.bind(session.push_audio, dialect.opened, dialect.receive)
    except BaseException:
        await peer.close()
        calls.abandon(slot)
        raise
    calls.start(Call(slot, peer, dialect, session, owner=owner))
    return answer, session_id


def realtime_over_webrtc(model: str) -> DialectMaker:
    def make(channel: EventChannel, session_id: str) -> EventDialect:
        return RealtimeDialect(channel, model=model, webrtc=True)

    return make
