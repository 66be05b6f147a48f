"""Who may call: the optional API key, and which web origins may open a WebSocket.

With server.api_key set, clients must present it: as 'Authorization: Bearer <key>', or,
from a browser WebSocket (which cannot set headers), as the subprotocol
'openai-insecure-api-key.<key>', as the official SDKs send it.
"""

from __future__ import annotations

import hmac

from fastapi import Request, WebSocket

from app.errors import Unauthorized

KEY_SUBPROTOCOL = "openai-insecure-api-key."
REALTIME_SUBPROTOCOL = "realtime"


def key_matches(expected: str, token: str | None) -> bool:
    if not expected:
        return True  # no key configured: any token (or none) is accepted
    return token is not None and hmac.compare_digest(token.encode(), expected.encode())


def bearer_token(authorization: str | None) -> str | None:
    scheme, _, token = (authorization or "").partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else None


async def require_key(request: Request) -> None:
    expected = request.app.state.calls.settings.server.api_key
    if not key_matches(expected, bearer_token(request.headers.get("authorization"))):
        raise Unauthorized("missing or wrong API key: send 'Authorization: Bearer <key>'")


def websocket_token(websocket: WebSocket) -> str | None:
    """The key a WebSocket client presents, in its headers or its subprotocols."""
    token = bearer_token(websocket.headers.get("authorization"))
    if token is not None:
        return token
    for protocol in websocket.scope.get("subprotocols", []):
        if protocol.startswith(KEY_SUBPROTOCOL) and len(protocol) > len(KEY_SUBPROTOCOL):
            return str(protocol[len(KEY_SUBPROTOCOL) :])
    return None


def chosen_subprotocol(websocket: WebSocket) -> str | None:
    """A browser refuses the socket unless the server picks one of the subprotocols it
    offered; Realtime clients offer 'realtime'."""
    offered = websocket.scope.get("subprotocols", [])
    return REALTIME_SUBPROTOCOL if REALTIME_SUBPROTOCOL in offered else None


def origin_allowed(websocket: WebSocket, allowed: list[str]) -> bool:
    """Clients that are not browsers send no Origin. A browser page may open a socket
    from this server's own origin, or from one listed in server.allowed_origins
    ('*': any), so another site cannot use a visitor's browser to talk to the agent."""
    origin = websocket.headers.get("origin")
    if origin is None or "*" in allowed or origin in allowed:
        return True
    host = websocket.headers.get("host", "")
    return origin.split("://", 1)[-1] == host
