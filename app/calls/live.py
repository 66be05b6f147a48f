"""Live sessions (OpenAI's Live API): over a WebSocket once its session.start is taken,
or over WebRTC (POST /live/sessions). The same sessions as Realtime, in Live's words."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from starlette.websockets import WebSocket

from app.calls.admission import ANYONE, Caller
from app.calls.call import Call, DialectMaker, EventDialect
from app.calls.manager import CallManager
from app.calls.webrtc import open_webrtc
from app.calls.websocket import serve_websocket
from app.errors import SignallingError
from app.events.audio import AudioIn, AudioOut
from app.events.channel import EventChannel, NoChannel
from app.live.dialect import LiveDialect
from app.live.session_config import (
    SessionConfig,
    StartProblem,
    audio_format,
    backend_servers,
    expiry,
    to_changes,
)
from app.session.options import OptionChanges
from app.telephony.sip.leg import SipLeg

# How far ahead of playout a Live WebSocket is sent reply audio: Live tells a client
# nothing to truncate, so what it holds is what it plays after an interruption.
AHEAD_S = 0.3


def live_dialect(
    calls: CallManager,
    config: SessionConfig,
    *,
    websocket: bool,
    started_by: str | None = None,
) -> DialectMaker:
    """Makes the dialect of a Live call started with `config` (StartProblem if it asks
    for what this server cannot do)."""
    name, rate = audio_format(config)
    limits = calls.settings.limits
    recordings = calls.recordings
    record = recordings.open if config.store and recordings.on else None
    expires_at = expiry(calls.settings.pool.max_session_s)

    def make(channel: EventChannel, session_id: str) -> EventDialect:
        audio = (AudioIn(name, rate), AudioOut(name, rate)) if websocket else None
        return LiveDialect(
            channel,
            model=config.model,
            expires_at=expires_at,
            audio=audio,
            initial=config.input,
            stop=lambda: calls.stop(session_id, "close_requested"),
            started_by=started_by,
            delegation=config.delegation,
            record=record,
            max_append_s=limits.append_audio_s,
        )

    return make


def changes_of(calls: CallManager, config: SessionConfig) -> OptionChanges:
    voices = calls.runtime.responder.voices if calls.runtime.responder is not None else ()
    changes = to_changes(config, voices, calls.settings.limits)
    backend = config.delegation.responses if config.delegation is not None else None
    for spec in backend_servers(backend) if backend is not None else ():
        if (refused := calls.runtime.tools.refused(spec)) is not None:
            raise StartProblem(refused, "session.delegation.responses.tools")
    return changes


async def serve_live_websocket(
    calls: CallManager,
    websocket: WebSocket,
    config: SessionConfig,
    changes: Sequence[OptionChanges],
    started_by: str | None,
    *,
    owner: object | None = None,
    caller: Caller = ANYONE,
) -> None:
    """Run a Live session on an accepted WebSocket whose session.start was `config`
    (its option `changes`, with any of its client secret's before them)."""
    await serve_websocket(
        calls,
        websocket,
        changes,
        owner=owner,
        caller=caller,
        dialect_of=live_dialect(calls, config, websocket=True, started_by=started_by),
        via="live",
        ahead_s=AHEAD_S,
    )


async def open_live_webrtc(
    calls: CallManager,
    offer_sdp: str,
    config: SessionConfig,
    secret_changes: Sequence[OptionChanges] = (),
    *,
    owner: object | None = None,
    caller: Caller = ANYONE,
) -> tuple[str, str]:
    """Answer a Live WebRTC offer on a fresh slot: (answer_sdp, session_id)."""
    try:
        changes = [*secret_changes, changes_of(calls, config)]
        make = live_dialect(calls, config, websocket=False)
    except StartProblem as exc:
        raise SignallingError(f"session config: {exc} ({exc.param})") from exc
    return await open_webrtc(
        calls, offer_sdp, changes, via="live", owner=owner, caller=caller, dialect_of=make
    )


def live_guest(calls: CallManager) -> Callable[[Call], EventDialect]:
    """Live's words for a call that speaks Realtime (a SIP call, a Realtime WebRTC or
    WebSocket call), for a Live sideband attached to it."""

    def guest(call: Call) -> EventDialect:
        session_id = call.session.id
        dialect = LiveDialect(
            NoChannel(),
            model=calls.runtime.model,
            expires_at=time.time()
            - (time.monotonic() - call.started)
            + calls.settings.pool.max_session_s,
            stop=lambda: calls.stop(session_id, "close_requested"),
            began=call.started,
        )
        if isinstance(call.transport, SipLeg):
            dialect.keypad = call.transport.send_key
        return dialect

    return guest
