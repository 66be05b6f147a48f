"""Which Host names the server answers to, against DNS rebinding: a page on evil.example
whose name its owner points at 127.0.0.1 would otherwise be this server's own origin in
the visitor's browser, free to make, list and end calls on a keyless loopback server.

Taken by default: IP addresses, `localhost` and names under it, and requests with no Host
(HAProxy's health check sends none; a browser always sends one). Other names must be
listed in server.allowed_hosts ('*' for any).
"""

from __future__ import annotations

import ipaddress

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from app.api.errors import send_error


def host_allowed(host: str | None, allowed: list[str]) -> bool:
    if not host or "*" in allowed:
        return True
    name = _name(host)
    if name == "localhost" or name.endswith(".localhost") or name in allowed:
        return True
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def _name(host: str) -> str:
    """The Host header's name, lowercase, without its port or an IPv6 address's brackets."""
    host = host.strip().lower()
    if host.startswith("["):
        return host[1:].partition("]")[0]
    if host.count(":") == 1:
        host = host.rpartition(":")[0]
    return host.rstrip(".")  # the root's dot: "example.com." is example.com


class HostGuard:
    """400 for a request, 403 for a WebSocket handshake, naming a Host not allowed."""

    def __init__(self, app: ASGIApp, allowed: list[str]) -> None:
        self.app = app
        self.allowed = [_name(host) if host != "*" else host for host in allowed]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket"):
            host = Headers(scope=scope).get("host")
            if not host_allowed(host, self.allowed):
                shown = (host or "")[:100]
                message = f"Host {shown!r} is not one this server answers to (server.allowed_hosts)"
                if scope["type"] == "http":
                    await send_error(send, 400, "invalid_request_error", message)
                else:  # closing before accepting: the handshake gets 403
                    await send({"type": "websocket.close", "code": 1008, "reason": message[:120]})
                return
        await self.app(scope, receive, send)
