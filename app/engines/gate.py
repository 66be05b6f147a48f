"""Run blocking engine calls off the event loop, a bounded number at a time."""

from __future__ import annotations

import asyncio
import heapq
import itertools
import os
import threading
import time
import weakref
from collections.abc import AsyncGenerator, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Generic, TypeVar

from app.errors import EndOfStream

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

    # Every gate alive in the process, for metrics: engines are per process too.
    live: weakref.WeakSet[Gate] = weakref.WeakSet()

    def __init__(self, name: str, concurrency: int) -> None:
        self.name = name
        self.concurrency = concurrency
        self._free = concurrency
        self._waiters: list[tuple[int, int, asyncio.Future[None]]] = []
        self._order = itertools.count()
        self._executor = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix=name)
        # Since the start: calls, seconds spent waiting for a slot, and holding one.
        self.calls = 0
        self.waited_s = 0.0
        self.busy_s = 0.0
        Gate.live.add(self)

    @property
    def waiting(self) -> int:
        return len(self._waiters)

    @property
    def busy(self) -> bool:
        return self._free < self.concurrency or bool(self._waiters)

    def alone(self) -> bool:
        """Whether a call holding this gate is all the engines' work: nothing runs or waits
        at another gate, and nothing waits at this one (read from any thread)."""
        return not self._waiters and not any(g.busy for g in list(Gate.live) if g is not self)

    @classmethod
    def all_idle(cls) -> bool:
        """Whether no engine's gate has a call running or waiting."""
        return not any(gate.busy for gate in list(cls.live))

    @classmethod
    def anyone_waiting(cls) -> bool:
        """Whether a call waits at any engine's gate: work added now delays it."""
        return any(gate.waiting for gate in list(cls.live))

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

    async def _timed_acquire(self, priority: int) -> float:
        """Acquire, counting the wait; returns when the slot was had."""
        asked = time.monotonic()
        await self._acquire(priority)
        had = time.monotonic()
        self.calls += 1
        self.waited_s += had - asked
        return had

    def _timed_release(self, had: float) -> None:
        self.busy_s += time.monotonic() - had
        self._release()

    async def run(
        self,
        fn: Callable[..., T],
        *args: object,
        priority: int = 1,
        timeout_s: float | None = None,
        on_cancel: Callable[[], None] | None = None,
    ) -> T:
        """`fn(*args)` in a worker thread. TimeoutError after `timeout_s`: the caller
        stops waiting, but a thread cannot be stopped, so its slot stays taken until
        the call returns, and concurrency stays truthful. `on_cancel`: called when the
        caller is cancelled, before the call returns (to tell `fn` to stop)."""
        had = await self._timed_acquire(priority)
        future = asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)
        try:
            result = await asyncio.wait_for(asyncio.shield(future), timeout_s)
        except TimeoutError:
            future.add_done_callback(lambda _: self._timed_release(had))
            raise
        except asyncio.CancelledError:
            # The caller is gone; the thread still finishes its call first.
            if on_cancel is not None:
                on_cancel()
            await asyncio.wait([future])
            self._timed_release(had)
            raise
        except BaseException:
            self._timed_release(had)
            raise
        self._timed_release(had)
        return result

    async def stream(
        self, produce: Callable[[], Iterator[T]], *, ahead: int, priority: int = 1
    ) -> AsyncGenerator[T, None]:
        """Run a blocking generator on the gate and yield its items on the loop.

        The worker runs at most `ahead` items ahead of the reader, then blocks:
        a slow reader slows the engine instead of letting it take the cores the
        reader needs. Closing the iterator stops the worker at its next item and
        holds the slot until the worker is out of the engine.
        """
        had = await self._timed_acquire(priority)
        bridge: _Bridge[T] = _Bridge(asyncio.get_running_loop(), ahead)
        worker = asyncio.get_running_loop().run_in_executor(self._executor, bridge.pump, produce)
        try:
            while True:
                try:
                    item = await bridge.get()
                except EndOfStream:
                    break
                yield item
        finally:
            bridge.stop()
            try:
                await asyncio.wait([worker])
            finally:
                self._timed_release(had)
        await worker  # re-raises what the generator raised

    def call(self, fn: Callable[..., T], *args: object) -> T:
        """`fn(*args)` on the gate's own threads, waited for here: for an engine's warm-up,
        from outside the loop. llama.cpp's OpenMP threads decode ~30% slower for a thread
        other than the one that first decoded (a team per calling thread)."""
        return self._executor.submit(fn, *args).result()

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)


_END = object()


class _Bridge(Generic[T]):
    """Items from one worker thread to one reader on the loop, at most `ahead` in flight.

    The worker takes a permit per item and the reader returns it, so the
    loop-side queue can never hold more than `ahead` items (its bound); stop()
    hands the worker a permit so it wakes, sees the stop and returns.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, ahead: int) -> None:
        self._loop = loop
        self._permits = threading.Semaphore(ahead)
        self._items: asyncio.Queue[object] = asyncio.Queue(maxsize=ahead + 1)
        self._stopped = threading.Event()

    def pump(self, produce: Callable[[], Iterator[T]]) -> None:
        """Runs in the worker thread."""
        iterator = produce()
        try:
            for item in iterator:
                self._permits.acquire()
                if self._stopped.is_set():
                    return
                self._loop.call_soon_threadsafe(self._items.put_nowait, item)
        finally:
            close = getattr(iterator, "close", None)
            if close is not None:
                close()
            # The end marker needs no permit: the queue keeps one place for it.
            if not self._stopped.is_set():
                self._loop.call_soon_threadsafe(self._items.put_nowait, _END)

    async def get(self) -> T:
        item = await self._items.get()
        if item is _END:
            raise EndOfStream("the generator finished")
        self._permits.release()
        return item  # type: ignore[return-value]

    def stop(self) -> None:
        self._stopped.set()
        self._permits.release()
