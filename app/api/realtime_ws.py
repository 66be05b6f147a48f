"""OpenAI Realtime over WebSocket: GET /v1/realtime, the same sessions as WebRTC.

Audio comes in as input_audio_buffer.append (base64 pcm16 mono, 24 kHz) and goes
out as response.output_audio.delta. A full pool is answered with an `error` event
of type session_limit_reached and close code 1008, as the system this design
comes from does.
"""

from __future__ import annotations

from fastapi import APIRouter, WebSocket

from app.api.auth import chosen_subprotocol
from app.api.callers import caller
from app.api.deps import calls_of
from app.api.sidebands import serve_sideband
from app.api.sockets import admit, refusing
from app.calls.call import Call, EventDialect
from app.calls.manager import CallManager
from app.calls.sideband import Guest
from app.calls.websocket import serve_websocket
from app.events.channel import NoChannel
from app.realtime import server_events as events
from app.realtime.dialect import RealtimeDialect

router = APIRouter()


@router.websocket("/v1/realtime")
async def realtime(websocket: WebSocket, call_id: str | None = None) -> None:
    """A Realtime session over the socket; `?model=` is accepted and ignored (the server
    runs the model it was started with). With `?call_id=`, a sideband controller of that
    WebRTC call instead, for the server's API key only."""
    calls = calls_of(websocket)
    if call_id is not None:
        guest = _realtime_guest(calls)
        await serve_sideband(websocket, call_id, RealtimeDialect, guest, _error,
                             "call_not_found", chosen_subprotocol(websocket))  # fmt: skip
        return
    admitted = await admit(websocket)
    if admitted is None:
        return
    secret = admitted.secret
    await websocket.accept(subprotocol=chosen_subprotocol(websocket))
    changes = [secret.changes] if secret is not None and secret.changes is not None else []
    with_key = bool(calls.settings.server.api_key) and secret is None
    who = caller(websocket, with_server_key=with_key)
    await refusing(
        websocket, serve_websocket(calls, websocket, changes, owner=secret, caller=who), _error
    )


def _realtime_guest(calls: CallManager) -> Guest:
    def guest(call: Call) -> EventDialect:
        return RealtimeDialect(NoChannel(), model=calls.runtime.model, webrtc=True)

    return guest


def _error(type_: str, code: str, message: str) -> dict[str, object]:
    return events.error(message, type_=type_, code=code)
