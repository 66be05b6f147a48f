"""Mangled offers at a running server, on every route that takes one: each is answered
(an answer, or a 4xx in the error shape), and no slot is left behind."""

from __future__ import annotations

from collections.abc import Callable

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.fuzz.test_parsers import OFFER, mutations
from tests.support.server import ServerProcess

ROUTES = [
    ("/v1/realtime/calls", "application/sdp"),
    ("/whip", "application/sdp"),
    ("/offer", "application/json"),
]


@pytest.fixture(scope="module")
def server(start_module_server: Callable[..., ServerProcess]) -> ServerProcess:
    """Its own: the pool must be empty between examples."""
    return start_module_server("--agent", "echo", "--max-sessions", "2")


@settings(max_examples=40, deadline=None)
@given(st.one_of(mutations(OFFER), st.text(max_size=200)), st.sampled_from(ROUTES))
def test_mangled_offers_are_answered_and_hold_no_slot(
    server: ServerProcess, sdp: str, route: tuple[str, str]
) -> None:
    path, kind = route
    body = {"json": {"sdp": sdp, "type": "offer"}} if path == "/offer" else {"content": sdp}
    with httpx.Client(base_url=server.url, timeout=30) as http:
        response = http.post(path, headers={"content-type": kind}, **body)  # type: ignore[arg-type]
        assert response.status_code in (200, 201, 400, 413), response.text
        if response.status_code >= 400:
            assert response.json()["error"]["message"]
        else:  # some mangling leaves a valid offer: end that call
            location = response.headers.get("location") or (
                f"/v1/realtime/calls/{response.json()['session_id']}"
            )
            http.delete(location)
        assert http.get("/v1/pool").json()["in_use"] == 0
