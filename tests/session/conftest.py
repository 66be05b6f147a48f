from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.session.fakes import SPEAKERS


@pytest.fixture(autouse=True)
async def _close_speakers() -> AsyncIterator[None]:
    yield
    while SPEAKERS:
        await SPEAKERS.pop().close()
