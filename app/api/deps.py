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


# The dependencies are coroutines though they await nothing: FastAPI runs a plain `def`
# one on its thread pool, and under a pipelining flood that hop waited 0.5-1.8 s for the
# GIL (tests/api/test_no_thread_hops.py).
async def _runtime(connection: HTTPConnection) -> Runtime:
    return runtime_of(connection)


async def _calls(connection: HTTPConnection) -> CallManager:
    return calls_of(connection)


Shared = Annotated[Runtime, Depends(_runtime)]
Calls = Annotated[CallManager, Depends(_calls)]
