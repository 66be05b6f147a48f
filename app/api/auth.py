"""Who may call: the optional API key, client secrets, and which web origins may
open a WebSocket.

With server.api_key set, clients must present it, or a client secret (`ek_...`)
minted with it: as 'Authorization: Bearer <key>', or, from a browser WebSocket
(which cannot set headers), as the subprotocol 'openai-insecure-api-key.<key>',
as the official SDKs send it.
"""

from __future__ import annotations

import hmac

from fastapi import Request, WebSocket

from app.api.deps import runtime_of
from app.api.secret_store import SECRET_PREFIX, ClientSecrets, Secret
from app.errors import Unauthorized

KEY_SUBPROTOCOL = "openai-insecure-api-key."
REALTIME_SUBPROTOCOL = "realtime"


def authorize(
    token: str | None, api_key: str, minted: ClientSecrets, *, expired_ok: bool = False
) -> Secret | None:
    """The client secret `token` is, or None for the server's own key (or no key needed).

    Raises Unauthorized for a wrong key, and for an `ek_` key that is unknown or has
    expired (checked even on a server without a key: it was meant to be one of ours).
    `expired_ok`: an expired secret will do, to end a call it made.
    """
    if token is not None and token.startswith(SECRET_PREFIX):
        secret = minted.find(token, expired_ok=expired_ok)
        if secret is None:
            raise Unauthorized("unknown or expired client secret")
        return secret
    if not key_matches(api_key, token):
        raise Unauthorized("missing or wrong API key: send 'Authorization: Bearer <key>'")
    return None


def key_matches(expected: str, token: str | None) -> bool:
    if not expected:
        return True  # no key configured: any token (or none) is accepted
    return token is not None and hmac.compare_digest(token.encode(), expected.encode())


def bearer_token(authorization: str | None) -> str | None:
    scheme, _, token = (authorization or "").partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else None


async def require_key(request: Request) -> None:
    """A route dependency; the client secret used, if any, is left in request.state.secret."""
    token = bearer_token(request.headers.get("authorization"))
    api_key = runtime_of(request).settings.server.api_key
    request.state.secret = authorize(token, api_key, request.app.state.client_secrets)


async def require_key_to_end(request: Request) -> None:
    """require_key for ending a call: the secret that made it may have expired since."""
    token = bearer_token(request.headers.get("authorization"))
    api_key = runtime_of(request).settings.server.api_key
    minted = request.app.state.client_secrets
    request.state.secret = authorize(token, api_key, minted, expired_ok=True)


async def require_admin(request: Request) -> None:
    """A route dependency for what observes every call (the pool, stats, usage): the
    server's own key, when one is set; a client secret, which is one caller's, is not
    enough."""
    api_key = runtime_of(request).settings.server.api_key
    if not key_matches(api_key, bearer_token(request.headers.get("authorization"))):
        raise Unauthorized("this route needs the server's API key: 'Authorization: Bearer <key>'")


def caller_of(request: Request) -> Secret | None:
    """The client secret a request was authorized with (None: the server's key, or no key
    set), as require_key left it."""
    secret: Secret | None = getattr(request.state, "secret", None)
    return secret


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
