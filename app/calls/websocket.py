"""A Realtime session over a WebSocket (GET /v1/realtime): the audio in the events."""

from __future__ import annotations

from collections.abc import Sequence

from starlette.websockets import WebSocket

from app.audio.pushed_playout import SocketPlayout
from app.calls.admission import ANYONE, Caller
from app.calls.call import Call, configure
from app.calls.manager import CallManager
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
) -> None:
    """Run one Realtime session on an accepted WebSocket until it ends."""
    responder, session_id, slot = calls.claim("websocket", caller)
    limits = calls.settings.limits
    transport = WsTransport(websocket, session_id, max_message_bytes=limits.ws_message_bytes)
    dialect = RealtimeDialect(
        transport, model=calls.runtime.model, webrtc=False, max_append_s=limits.append_audio_s
    )

    async def push(pcm: bytes) -> None:
        await transport.send_when_room(dialect.audio_delta(pcm))

    try:
        playout = SocketPlayout(session_id, RATE, push)
        session = calls.session(session_id, responder, playout, dialect.deliver)
        configure(session, changes)
    except BaseException:
        calls.pool.release(slot)
        raise
    dialect.attach(session)
    transport.start(dialect.receive_in_steps)
    dialect.opened()
    await calls.run(Call(slot, transport, dialect, session, owner=owner))
