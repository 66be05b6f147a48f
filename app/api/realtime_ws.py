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

from app.api.auth import authorize, chosen_subprotocol, websocket_token
from app.api.callers import caller
from app.api.deps import calls_of
from app.api.origins import origin_allowed
from app.calls.sideband import control
from app.calls.websocket import serve_websocket
from app.errors import (
    NotFound,
    NotReady,
    RateLimited,
    SessionLimitReached,
    SignallingError,
    Unauthorized,
)
from app.realtime import server_events as events

log = logging.getLogger(__name__)

router = APIRouter()

POLICY_VIOLATION = 1008  # what a full pool closes with
TRY_AGAIN_LATER = 1013


@router.websocket("/v1/realtime")
async def realtime(websocket: WebSocket, call_id: str | None = None) -> None:
    """A Realtime session over the socket; `?model=` is accepted and ignored (the server
    runs the model it was started with). With `?call_id=`, a sideband controller of that
    WebRTC call instead, for the server's API key only."""
    calls = calls_of(websocket)
    server = calls.settings.server
    # Refused before the handshake completes: the client sees HTTP 403.
    if not origin_allowed(websocket, server.allowed_origins):
        log.warning("refused a WebSocket from origin %s", websocket.headers.get("origin"))
        await websocket.close(POLICY_VIOLATION, "origin not allowed")
        return
    try:
        secret = authorize(
            websocket_token(websocket), server.api_key, websocket.app.state.client_secrets
        )
    except Unauthorized as exc:
        await websocket.close(POLICY_VIOLATION, str(exc)[:120])
        return
    if call_id is not None and secret is not None:
        await websocket.close(POLICY_VIOLATION, "a client secret cannot control a call")
        return
    await websocket.accept(subprotocol=chosen_subprotocol(websocket))
    if call_id is not None:
        try:
            await control(calls, call_id, websocket)
        except NotFound as exc:
            await _refuse(
                websocket, "invalid_request_error", str(exc), POLICY_VIOLATION, "call_not_found"
            )
        return
    changes = [secret.changes] if secret is not None and secret.changes is not None else []
    who = caller(websocket, with_server_key=bool(server.api_key) and secret is None)
    try:
        await serve_websocket(calls, websocket, changes, owner=secret, caller=who)
    except RateLimited as exc:
        await _refuse(websocket, exc.type, str(exc), POLICY_VIOLATION)
    except SessionLimitReached as exc:
        await _refuse(websocket, exc.type, str(exc), POLICY_VIOLATION)
    except NotReady as exc:
        await _refuse(websocket, exc.type, str(exc), TRY_AGAIN_LATER)
    except SignallingError as exc:  # a client secret's session config no longer fits
        await _refuse(websocket, exc.type, str(exc), POLICY_VIOLATION)


async def _refuse(
    websocket: WebSocket, type_: str, message: str, code: int, error_code: str | None = None
) -> None:
    with contextlib.suppress(WebSocketDisconnect, RuntimeError, OSError):
        event = events.error(message, type_=type_, code=error_code or type_)
        await websocket.send_text(json.dumps(event))
        await websocket.close(code, message[:120])
