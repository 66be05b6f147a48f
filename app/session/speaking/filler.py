"""A short line said while a reply waits on a tool, so that a caller is not left in
silence: the wait is the call and the LLM's next round (on the embedded model, mostly
the round: ~1.7 s, where the call took 13 ms).

It is said once the wait has lasted long enough; if the reply's words come first, it is
never said, and if they come while it is being said, they wait for it to end.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable

from app.errors import EndOfStream


class Filler:
    def __init__(self, say: Callable[[], Awaitable[None]], after_s: float) -> None:
        self._speaking = False
        self._task = asyncio.create_task(self._run(say, after_s), name="filler")

    async def _run(self, say: Callable[[], Awaitable[None]], after_s: float) -> None:
        await asyncio.sleep(after_s)
        self._speaking = True
        with contextlib.suppress(EndOfStream):  # the reply was cut short meanwhile
            await say()

    async def settle(self) -> None:
        """The reply goes on: a filler not begun is dropped, one begun is let end."""
        if not self._speaking:
            self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task

    def cancel(self) -> None:
        self._task.cancel()
