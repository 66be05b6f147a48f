"""Owning and cancelling background tasks."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
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
