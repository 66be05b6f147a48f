"""What every OpenAI WebSocket route (Realtime's, Live's) does before and around a
session: check the origin and the key, and refuse a call that cannot start with an
error event and a close code."""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from fastapi import WebSocket
from starlette.websockets import WebSocketDisconnect

from app.api.auth import authorize, websocket_token
from app.api.deps import calls_of
from app.api.origins import origin_allowed
from app.api.secret_store import Secret
from app.errors import NotReady, RateLimited, SessionLimitReached, SignallingError, Unauthorized

log = logging.getLogger(__name__)

POLICY_VIOLATION = 1008  # what a full pool closes with
TRY_AGAIN_LATER = 1013

# An error event for the client: (type, code, message) -> the event.
ErrorEvent = Callable[[str, str, str], dict[str, object]]


@dataclass(frozen=True, slots=True)
class Admitted:
    secret: Secret | None  # the client secret it came with; None: the server's key


async def admit(websocket: WebSocket) -> Admitted | None:
    """Check a socket's origin and key before the handshake completes (the client sees
    HTTP 403); None when it was refused."""
    server = calls_of(websocket).settings.server
    if not origin_allowed(websocket, server.allowed_origins):
        log.warning("refused a WebSocket from origin %s", websocket.headers.get("origin"))
        await websocket.close(POLICY_VIOLATION, "origin not allowed")
        return None
    try:
        secret = authorize(
            websocket_token(websocket), server.api_key, websocket.app.state.client_secrets
        )
    except Unauthorized as exc:
        await websocket.close(POLICY_VIOLATION, str(exc)[:120])
        return None
    return Admitted(secret)


async def refusing(websocket: WebSocket, run: Awaitable[None], error: ErrorEvent) -> None:
    """Run a session; a call that cannot start is told why in `error`'s words, and closed."""
    try:
        await run
    except (RateLimited, SessionLimitReached, SignallingError) as exc:
        await refuse(websocket, error(exc.type, exc.type, str(exc)), POLICY_VIOLATION, str(exc))
    except NotReady as exc:
        await refuse(websocket, error(exc.type, exc.type, str(exc)), TRY_AGAIN_LATER, str(exc))


async def refuse(websocket: WebSocket, event: dict[str, object], code: int, reason: str) -> None:
    with contextlib.suppress(WebSocketDisconnect, RuntimeError, OSError):
        await websocket.send_text(json.dumps(event))
        await websocket.close(code, reason[:120])
