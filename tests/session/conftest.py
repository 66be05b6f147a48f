from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.session.fakes import SESSIONS, SPEAKERS


@pytest.fixture(autouse=True)
async def _close_doubles() -> AsyncIterator[None]:
    """Sessions and their tracks end with their test, so none runs on into the next."""
    yield
    while SESSIONS:
        await SESSIONS.pop().close()
    while SPEAKERS:
        await SPEAKERS.pop().close()
