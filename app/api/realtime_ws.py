"""OpenAI Realtime over WebSocket: GET /v1/realtime, the same sessions as WebRTC.

Audio comes in as input_audio_buffer.append (base64 pcm16 mono, 24 kHz) and goes
out as response.output_audio.delta. A full pool is answered with an `error` event
of type session_limit_reached and close code 1008, as the system this design
comes from does.
"""

from __future__ import annotations

import contextlib
import json
import logging

from fastapi import APIRouter, WebSocket
from starlette.websockets import WebSocketDisconnect

from app.api.auth import chosen_subprotocol, key_matches, origin_allowed, websocket_token
from app.calls import CallManager
from app.errors import NotReady, SessionLimitReached
from app.realtime import server_events as events

log = logging.getLogger(__name__)

router = APIRouter()

POLICY_VIOLATION = 1008  # what a full pool closes with
TRY_AGAIN_LATER = 1013


@router.websocket("/v1/realtime")
async def realtime(websocket: WebSocket) -> None:
    """`?model=` is accepted and ignored: the server runs the model it was started with."""
    calls: CallManager = websocket.app.state.calls
    server = calls.settings.server
    # Refused before the handshake completes: the client sees HTTP 403.
    if not origin_allowed(websocket, server.allowed_origins):
        log.warning("refused a WebSocket from origin %s", websocket.headers.get("origin"))
        await websocket.close(POLICY_VIOLATION, "origin not allowed")
        return
    if not key_matches(server.api_key, websocket_token(websocket)):
        await websocket.close(POLICY_VIOLATION, "missing or wrong API key")
        return
    await websocket.accept(subprotocol=chosen_subprotocol(websocket))
    try:
        await calls.serve_websocket(websocket)
    except SessionLimitReached as exc:
        await _refuse(websocket, exc.type, str(exc), POLICY_VIOLATION)
    except NotReady as exc:
        await _refuse(websocket, exc.type, str(exc), TRY_AGAIN_LATER)


async def _refuse(websocket: WebSocket, type_: str, message: str, code: int) -> None:
    with contextlib.suppress(WebSocketDisconnect, RuntimeError, OSError):
        event = events.error(message, type_=type_, code=type_)
        await websocket.send_text(json.dumps(event))
        await websocket.close(code, message[:120])
