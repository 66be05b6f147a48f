"""Every HTTP request body has a bound, whatever route it is for: one declared bigger is
refused before any of it is read, and one that turns out bigger stops being read there.
Routes that take less (an SDP offer) check their own smaller limit as well."""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.api.errors import send_error
from app.errors import TooLarge


class BodyLimit:
    """Pure ASGI, so it sees the body as it arrives, before any route or parser."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope["headers"]).get(b"content-length", b"")
        if declared.isdigit() and int(declared) > self.limit:
            message = f"the body is {int(declared)} bytes; the most taken is {self.limit}"
            await send_error(send, 413, TooLarge.type, message)
            return
        seen = 0

        async def counted() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.limit:
                    # Raised inside the route's read: its exception handler answers 413.
                    raise TooLarge(f"the body is over {self.limit} bytes, the most taken")
            return message

        await self.app(scope, counted, send)
