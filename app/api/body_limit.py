"""Every HTTP request body has a bound, whatever route it is for: one declared bigger is
refused before any of it is read, and one that turns out bigger stops being read there.
Routes that take less (an SDP offer) check their own smaller limit as well."""

from __future__ import annotations

import json

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.api.errors import error_body
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
            await _refuse(send, f"the body is {int(declared)} bytes; the most taken is "
                                f"{self.limit}")  # fmt: skip
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


async def _refuse(send: Send, message: str) -> None:
    body = json.dumps(error_body(TooLarge.type, message)).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 413,
            "headers": [(b"content-type", b"application/json"),
                        (b"content-length", str(len(body)).encode()),
                        (b"connection", b"close")],
        }
    )  # fmt: skip
    await send({"type": "http.response.body", "body": body})
