"""Every error a route can raise, mapped to a status code in one place."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import Send

from app.errors import (
    BadRequest,
    Conflict,
    Forbidden,
    NotFound,
    NotReady,
    RateLimited,
    SessionLimitReached,
    SignallingError,
    TooLarge,
    TransferFailed,
    Unauthorized,
    VoiceAgentError,
)


def error_body(type_: str, message: str) -> dict[str, dict[str, str]]:
    return {"error": {"type": type_, "message": message}}


async def send_error(
    send: Send,
    status: int,
    type_: str,
    message: str,
    headers: list[tuple[bytes, bytes]] | None = None,
) -> None:
    """An error answered from ASGI middleware, before any route: the same JSON as theirs."""
    body = json.dumps(error_body(type_, message)).encode()
    sent = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": sent + (headers or [])})
    await send({"type": "http.response.body", "body": body})


def validation_problems(exc: RequestValidationError | ValidationError) -> str:
    """Each problem as `where: what`, as a client can act on it."""
    return "; ".join(
        f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in exc.errors()
    )


# The errors answered with a status and their message, and nothing else.
PLAIN_STATUS: dict[type[VoiceAgentError], int] = {
    SignallingError: 400,
    BadRequest: 400,
    Forbidden: 403,
    NotFound: 404,
    Conflict: 409,
    TooLarge: 413,
    TransferFailed: 502,
}


def _answering_with(status: int) -> Callable[[Request, Exception], Awaitable[JSONResponse]]:
    async def answer(_: Request, exc: Exception) -> JSONResponse:
        type_ = exc.type if isinstance(exc, VoiceAgentError) else "server_error"
        return JSONResponse(error_body(type_, str(exc)), status_code=status)

    return answer


def install(app: FastAPI) -> None:
    @app.exception_handler(SessionLimitReached)
    async def _full(_: Request, exc: SessionLimitReached) -> JSONResponse:
        return JSONResponse(
            error_body(exc.type, str(exc)),
            status_code=503,
            headers={"Retry-After": str(exc.retry_after_s)},
        )

    @app.exception_handler(RateLimited)
    async def _too_fast(_: Request, exc: RateLimited) -> JSONResponse:
        return JSONResponse(
            error_body(exc.type, str(exc)),
            status_code=429,
            headers={"Retry-After": str(exc.retry_after_s)},
        )

    @app.exception_handler(NotReady)
    async def _not_ready(_: Request, exc: NotReady) -> JSONResponse:
        return JSONResponse(
            error_body(exc.type, str(exc)), status_code=503, headers={"Retry-After": "5"}
        )

    @app.exception_handler(Unauthorized)
    async def _unauthorized(_: Request, exc: Unauthorized) -> JSONResponse:
        return JSONResponse(
            error_body(exc.type, str(exc)), status_code=401, headers={"WWW-Authenticate": "Bearer"}
        )

    for error, status in PLAIN_STATUS.items():
        app.add_exception_handler(error, _answering_with(status))

    @app.exception_handler(RequestValidationError)
    async def _bad_body(_: Request, exc: RequestValidationError) -> JSONResponse:
        return JSONResponse(
            error_body("invalid_request_error", validation_problems(exc)), status_code=400
        )

    @app.exception_handler(StarletteHTTPException)
    async def _http(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        # Starlette's own (404, 405): in the same shape as every other error.
        return JSONResponse(
            error_body("invalid_request_error", str(exc.detail)),
            status_code=exc.status_code,
            headers=exc.headers,
        )

    @app.exception_handler(VoiceAgentError)
    async def _other(_: Request, exc: VoiceAgentError) -> JSONResponse:
        return JSONResponse(error_body(exc.type, str(exc)), status_code=500)
