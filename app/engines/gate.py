"""Run blocking engine calls off the event loop, a bounded number at a time."""

from __future__ import annotations

import asyncio
import os
import time
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
    """A private thread pool sized to the engine's concurrency.

    Callers beyond `concurrency` wait on the semaphore in the loop, not in a
    thread, so a burst of sessions costs no threads. `waiting` feeds metrics.
    """

    def __init__(self, name: str, concurrency: int) -> None:
        self.name = name
        self.concurrency = concurrency
        self._semaphore = asyncio.Semaphore(concurrency)
        self._executor = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix=name)
        self.waiting = 0
        self.busy_s = 0.0

    async def run(self, fn: Callable[..., T], *args: object) -> T:
        self.waiting += 1
        try:
            await self._semaphore.acquire()
        finally:
            self.waiting -= 1
        started = time.perf_counter()
        try:
            # If the caller is cancelled, the thread still finishes its call; the
            # semaphore is held until it does, so concurrency stays truthful.
            future = asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)
            return await asyncio.shield(future)
        except asyncio.CancelledError:
            await asyncio.wait([future])
            raise
        finally:
            self.busy_s += time.perf_counter() - started
            self._semaphore.release()

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)
