"""A Realtime session over a WebSocket (GET /v1/realtime): the audio in the events."""

from __future__ import annotations

from collections.abc import Sequence

from starlette.websockets import WebSocket

from app.audio.pushed_playout import MAX_AHEAD_S, SocketPlayout
from app.calls.admission import ANYONE, Caller
from app.calls.call import Call, DialectMaker, EventDialect, configure
from app.calls.manager import CallManager
from app.events.channel import EventChannel
from app.realtime.dialect import RealtimeDialect
from app.realtime.session_config import RATE
from app.session.options import OptionChanges
from app.ws.transport import WsTransport


async def serve_websocket(
    calls: CallManager,
    websocket: WebSocket,
    changes: Sequence[OptionChanges] = (),
    *,
    owner: object | None = None,
    caller: Caller = ANYONE,
    dialect_of: DialectMaker | None = None,
    via: str = "websocket",
    ahead_s: float = MAX_AHEAD_S,
) -> None:
    """Run one session on an accepted WebSocket until it ends: Realtime's, unless
    `dialect_of` makes another. `ahead_s`: how far ahead of playout reply audio is sent."""
    responder, session_id, slot = calls.claim(via, caller)
    limits = calls.settings.limits
    transport = WsTransport(websocket, session_id, max_message_bytes=limits.ws_message_bytes)
    make = dialect_of or _realtime(calls.runtime.model, limits.append_audio_s)
    dialect = make(transport, session_id)

    async def push(pcm: bytes) -> None:
        await transport.send_when_room(dialect.audio_delta(pcm))

    try:
        playout = SocketPlayout(session_id, RATE, push, ahead_s=ahead_s)
        session = calls.session(session_id, responder, playout, dialect.deliver)
        configure(session, changes)
    except BaseException:
        calls.abandon(slot)
        raise
    dialect.attach(session)
    transport.start(dialect.receive_in_steps)
    dialect.opened()
    await calls.run(Call(slot, transport, dialect, session, owner=owner))


def _realtime(model: str, max_append_s: float) -> DialectMaker:
    def make(channel: EventChannel, session_id: str) -> EventDialect:
        return RealtimeDialect(channel, model=model, webrtc=False, max_append_s=max_append_s)

    return make
