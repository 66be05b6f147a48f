"""What routes reach the server through: the runtime every call shares (settings,
engines, counters) and the calls themselves. One accessor each, as a FastAPI dependency
(`Shared`, `Calls`) or called on a request or WebSocket."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends
from starlette.requests import HTTPConnection

from app.calls.manager import CallManager
from app.runtime import Runtime


def runtime_of(connection: HTTPConnection) -> Runtime:
    runtime: Runtime = connection.app.state.runtime
    return runtime


def calls_of(connection: HTTPConnection) -> CallManager:
    calls: CallManager = connection.app.state.calls
    return calls


Shared = Annotated[Runtime, Depends(runtime_of)]
Calls = Annotated[CallManager, Depends(calls_of)]
