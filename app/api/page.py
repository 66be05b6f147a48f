"""The page's files, served under every path that is not the API's.

A plain StaticFiles mount at "/" would answer any method on an API path with its own
404 (GET /offer, HEAD /healthz): those get 405 with the methods the route does take."""

from __future__ import annotations

from starlette.routing import BaseRoute, Match, Mount
from starlette.staticfiles import StaticFiles
from starlette.types import Receive, Scope, Send

from app.api.errors import send_error

METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE")


class PageFiles(StaticFiles):
    def __init__(self, directory: str, routes: list[BaseRoute]) -> None:
        super().__init__(directory=directory, html=True)
        self._routes = routes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            allowed = self._methods_at(scope)
            if allowed:
                await send_error(
                    send,
                    405,
                    "invalid_request_error",
                    f"{scope['method']} is not taken here; {', '.join(sorted(allowed))} is",
                    headers=[(b"allow", ", ".join(sorted(allowed)).encode())],
                )
                return
        await super().__call__(scope, receive, send)

    def _methods_at(self, scope: Scope) -> set[str]:
        """The methods the API's routes take at this path (none: not an API path)."""
        return {
            method
            for route in self._routes
            if not isinstance(route, Mount)
            for method in METHODS
            if route.matches({**scope, "method": method})[0] == Match.FULL
        }
