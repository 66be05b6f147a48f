"""Owning and cancelling background tasks."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import Any

log = logging.getLogger(__name__)


async def cancel_task(task: asyncio.Task[Any] | None, timeout_s: float = 2.0) -> bool:
    """Cancel `task` and wait up to `timeout_s` for it to finish.

    Returns False if it did not finish in time (it is stuck in uncancellable
    work). Only the caller's own cancellation propagates; the task's is absorbed.
    """
    if task is None or task.done():
        return True
    task.cancel()
    done, _ = await asyncio.wait([task], timeout=timeout_s)
    if not done:
        log.warning("task %s did not stop within %.1fs", task.get_name(), timeout_s)
        return False
    return True


def log_task_failure(task: asyncio.Task[Any]) -> None:
    """Done-callback: background tasks must not fail silently."""
    if task.cancelled():
        return
    exc = task.exception()
    if exc is not None:
        log.error("task %s failed", task.get_name(), exc_info=exc)


def spawn(coro: Coroutine[Any, Any, Any], name: str) -> asyncio.Task[Any]:
    task = asyncio.create_task(coro, name=name)
    task.add_done_callback(log_task_failure)
    return task


class TaskSet:
    """Background tasks one object owns: each is let go when it finishes, and the rest
    are cancelled together when the owner closes."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[Any]] = set()

    def spawn(self, coro: Coroutine[Any, Any, Any], name: str) -> asyncio.Task[Any]:
        task = spawn(coro, name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def close(self, timeout_s: float = 2.0) -> None:
        await asyncio.gather(*(cancel_task(task, timeout_s) for task in list(self._tasks)))


class CloseOnce:
    """Runs an async close exactly once; later and concurrent callers await the same run.

    The close runs in its own task, so a caller that is cancelled while waiting
    does not leave it half done.
    """

    def __init__(self, close: Callable[[], Coroutine[Any, Any, None]], name: str) -> None:
        self._close = close
        self._name = name
        self._task: asyncio.Task[None] | None = None

    @property
    def started(self) -> bool:
        return self._task is not None

    async def __call__(self) -> None:
        if self._task is None:
            self._task = spawn(self._close(), self._name)
        await asyncio.shield(self._task)


class OneShot:
    """A callback due after a delay on the loop; start() again moves it, cancel() drops it."""

    def __init__(self, callback: Callable[[], None]) -> None:
        self._callback = callback
        self._handle: asyncio.TimerHandle | None = None

    def start(self, delay_s: float) -> None:
        self.cancel()
        self._handle = asyncio.get_running_loop().call_later(delay_s, self._fire)

    def cancel(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def _fire(self) -> None:
        self._handle = None
        self._callback()
