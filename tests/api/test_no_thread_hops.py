"""Every route and dependency is a coroutine: FastAPI runs a plain `def` one on its thread
pool, and that hop waits for the GIL behind a busy event loop. Under a pipelining flood
(tests/e2e/test_network_floods.py) /readyz, whose dependency was a plain `def`, answered
in 0.5-1.8 s; with both as coroutines, under 200 ms."""

from __future__ import annotations

import inspect
from collections.abc import Iterator

from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute, APIWebSocketRoute
from starlette.routing import BaseRoute

from app.config import Settings
from app.main import create_app


def calls(dependant: Dependant) -> Iterator[tuple[str, object]]:
    for dependency in dependant.dependencies:
        yield dependency.name or repr(dependency.call), dependency.call
        yield from calls(dependency)


def routes(within: list[BaseRoute]) -> Iterator[tuple[str, str, object]]:
    """(route, name, callable) for every endpoint and dependency FastAPI may call, through
    included routers (which this FastAPI keeps as routers, not as copied routes)."""
    for route in within:
        if isinstance(route, APIRoute | APIWebSocketRoute):
            yield route.path, route.path, route.dependant.call
            for name, call in calls(route.dependant):
                yield route.path, name, call
        included = getattr(route, "original_router", None)
        if included is not None:
            for depends in route.include_context.dependencies:  # type: ignore[attr-defined]
                yield "router", repr(depends.dependency), depends.dependency
            yield from routes(included.routes)


def test_routes_and_their_dependencies_run_on_the_event_loop() -> None:
    checked, on_threads = 0, []
    for path, name, call in routes(create_app(Settings()).routes):
        checked += 1
        if not inspect.iscoroutinefunction(call):
            on_threads.append(f"{path}: {name}")
    assert checked > 40, checked
    assert not on_threads, on_threads
