"""Which web pages may use the API from a browser: this server's own, and the origins in
server.allowed_origins. Browsers send a cross-site form POST (multipart, as
/v1/realtime/calls takes) without asking first, so CORS headers alone would not stop
another site from making calls with a visitor's browser: such requests are refused."""

from __future__ import annotations

from starlette.requests import HTTPConnection
from starlette.types import ASGIApp, Receive, Scope, Send

from app.api.errors import send_error

SAFE_METHODS = ("GET", "HEAD", "OPTIONS")
# The schemes a page of this server's own is served over (https: behind a proxy that ends
# TLS). Any other scheme with this host, evil://host:port, is not this server's page.
OWN_SCHEMES = ("http", "https")


def origin_allowed(connection: HTTPConnection, allowed: list[str]) -> bool:
    """Clients that are not browsers send no Origin. A browser page may call from this
    server's own origin, or from one listed in server.allowed_origins ('*': any)."""
    origin = connection.headers.get("origin")
    if origin is None or "*" in allowed or origin in allowed:
        return True
    scheme, sep, host = origin.partition("://")
    own_host = connection.headers.get("host", "")
    return bool(sep and host) and scheme.lower() in OWN_SCHEMES and host == own_host


class OriginGuard:
    """Refuses (403) requests that change something, sent by a page from an origin that
    is not allowed; CORS headers (app/main.py) let allowed pages read the answers."""

    def __init__(self, app: ASGIApp, allowed: list[str]) -> None:
        self.app = app
        self.allowed = allowed

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] not in SAFE_METHODS:
            connection = HTTPConnection(scope)
            if not origin_allowed(connection, self.allowed):
                origin = connection.headers.get("origin", "")[:100]
                message = f"pages from {origin} may not use this server (server.allowed_origins)"
                await send_error(send, 403, "invalid_request_error", message)
                return
        await self.app(scope, receive, send)
