"""Run blocking engine calls off the event loop, a bounded number at a time."""

from __future__ import annotations

import asyncio
import heapq
import itertools
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")


def default_threads() -> int:
    """Threads for an engine whose setting is 0: one per core we may run on.

    Engines' own defaults are worse here: CTranslate2 takes 4 whatever the
    machine, llama-cpp-python half the cores.
    """
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


class Gate:
    """A private thread pool sized to the engine's concurrency, with priorities.

    Callers beyond `concurrency` wait in the loop, not in a thread, so a burst
    of sessions costs no threads. Among waiters the lowest `priority` goes
    first, then the earliest: a reply's first clause (priority 0) overtakes
    other replies' later clauses, which have playout buffered ahead of them.
    """

    def __init__(self, name: str, concurrency: int) -> None:
        self.name = name
        self.concurrency = concurrency
        self._free = concurrency
        self._waiters: list[tuple[int, int, asyncio.Future[None]]] = []
        self._order = itertools.count()
        self._executor = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix=name)

    @property
    def waiting(self) -> int:
        return len(self._waiters)

    async def _acquire(self, priority: int) -> None:
        if self._free > 0 and not self._waiters:
            self._free -= 1
            return
        turn: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        entry = (priority, next(self._order), turn)
        heapq.heappush(self._waiters, entry)
        try:
            await turn
        except asyncio.CancelledError:
            if turn.done() and not turn.cancelled():
                self._release()  # handed a slot just as we were cancelled: pass it on
            else:
                self._waiters.remove(entry)
                heapq.heapify(self._waiters)
            raise

    def _release(self) -> None:
        while self._waiters:
            _, _, turn = heapq.heappop(self._waiters)
            if not turn.done():
                turn.set_result(None)
                return
        self._free += 1

    async def run(self, fn: Callable[..., T], *args: object, priority: int = 1) -> T:
        await self._acquire(priority)
        try:
            # If the caller is cancelled, the thread still finishes its call; the
            # slot is held until it does, so concurrency stays truthful.
            future = asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)
            return await asyncio.shield(future)
        except asyncio.CancelledError:
            await asyncio.wait([future])
            raise
        finally:
            self._release()

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)
