"""Request bodies read with a limit: a client that sends too much is refused before the
rest of it is read, not after it is all in memory."""

from __future__ import annotations

from fastapi import Request

from app.errors import TooLarge


async def read_limited(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise TooLarge(f"the body is {declared} bytes; this route takes at most {limit}")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise TooLarge(f"the body is over {limit} bytes, the most this route takes")
        chunks.append(chunk)
    return b"".join(chunks)
