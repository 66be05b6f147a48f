"""Which pages count as this server's own: its host over http or https, nothing else
(issue 48: `Origin: evil://127.0.0.1:PORT` passed, the scheme unread)."""

from __future__ import annotations

import pytest
from starlette.requests import HTTPConnection

from app.api.origins import origin_allowed

HOST = "127.0.0.1:8000"


def connection(origin: str | None) -> HTTPConnection:
    headers = [(b"host", HOST.encode())]
    if origin is not None:
        headers.append((b"origin", origin.encode()))
    return HTTPConnection({"type": "http", "headers": headers})


@pytest.mark.parametrize("origin", [None, f"http://{HOST}", f"https://{HOST}", f"HTTPS://{HOST}"])
def test_this_servers_own_pages_and_non_browsers_may_call(origin: str | None) -> None:
    assert origin_allowed(connection(origin), [])


@pytest.mark.parametrize(
    "origin",
    [f"evil://{HOST}", f"file://{HOST}", f"ws://{HOST}", f"javascript://{HOST}", HOST,
     "null", "http://", f"http://{HOST}.evil.example", "https://evil.example"],
)  # fmt: skip
def test_another_scheme_or_host_is_not_this_servers_page(origin: str) -> None:
    assert not origin_allowed(connection(origin), [])


def test_listed_origins_are_taken_as_they_are_written() -> None:
    assert origin_allowed(connection("https://app.example"), ["https://app.example"])
    assert not origin_allowed(connection("http://app.example"), ["https://app.example"])
    assert origin_allowed(connection(f"evil://{HOST}"), ["*"]), "'*': any page at all"
