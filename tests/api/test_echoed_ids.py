"""An id a client sent is quoted back in an error by its first 64 characters, never whole
(issue 48: a 404 echoed a 5,000-character session id in full)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from app.config import Settings
from app.ids import SHOWN_CHARS, shown
from app.main import create_app

LONG = "sess_" + "x" * 5_000


def test_an_id_is_shown_by_its_start() -> None:
    assert shown("sess_abc") == "'sess_abc'"
    assert shown(LONG) == repr(LONG[:SHOWN_CHARS]) + "…"


@pytest.fixture(scope="module")
def client() -> Iterator[TestClient]:
    """The app without its engines (no lifespan): enough for routes that find no call."""
    yield TestClient(create_app(Settings()), base_url="http://127.0.0.1")


@pytest.mark.parametrize(
    ("method", "path"),
    [("POST", "/v1/realtime/calls/{}/hangup"), ("DELETE", "/v1/realtime/calls/{}"),
     ("POST", "/live/sessions/{}/hangup"), ("POST", "/v1/live/sessions/{}/hangup"),
     ("POST", "/live/sessions/{}/reject"), ("GET", "/v1/live/sessions/{}/content")],
)  # fmt: skip
def test_a_404_quotes_a_long_id_by_its_start(client: TestClient, method: str, path: str) -> None:
    body = {"status_code": 486} if path.endswith("reject") else None
    response = client.request(method, path.format(LONG), json=body)
    assert response.status_code == 404, response.text
    message = response.json()["error"]["message"]
    assert LONG[:SHOWN_CHARS] in message and LONG[: SHOWN_CHARS + 1] not in message, message


def test_a_sideband_of_no_call_quotes_its_id_by_its_start(client: TestClient) -> None:
    url = f"ws://127.0.0.1/v1/live/sessions/{LONG}/attach"
    with client.websocket_connect(url, headers={"host": "127.0.0.1"}) as ws:
        message = ws.receive_json()["error"]["message"]
    assert LONG[:SHOWN_CHARS] in message and LONG[: SHOWN_CHARS + 1] not in message, message
