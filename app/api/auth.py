"""Optional API key: with server.api_key set, clients must send it as a Bearer token."""

from __future__ import annotations

import hmac

from fastapi import Request, WebSocket

from app.errors import Unauthorized


def key_matches(expected: str, authorization: str | None) -> bool:
    if not expected:
        return True  # no key configured: any token (or none) is accepted
    scheme, _, token = (authorization or "").partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(token.strip(), expected)


async def require_key(request: Request) -> None:
    expected = request.app.state.calls.settings.server.api_key
    if not key_matches(expected, request.headers.get("authorization")):
        raise Unauthorized("missing or wrong API key: send 'Authorization: Bearer <key>'")


def websocket_key_ok(websocket: WebSocket, expected: str) -> bool:
    return key_matches(expected, websocket.headers.get("authorization"))
