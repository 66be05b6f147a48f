from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator

import pytest

from app.engines.gate import Gate


async def test_urgent_work_overtakes_queued_work_and_concurrency_holds() -> None:
    gate = Gate("test", 1)
    order: list[str] = []
    running = 0
    peak = 0
    lock = threading.Lock()

    def work(name: str) -> None:
        nonlocal running, peak
        with lock:
            running += 1
            peak = max(peak, running)
        time.sleep(0.02)
        with lock:
            running -= 1
        order.append(name)

    first = asyncio.create_task(gate.run(work, "busy"))
    await asyncio.sleep(0.005)
    later = [asyncio.create_task(gate.run(work, f"later{i}")) for i in range(2)]
    await asyncio.sleep(0.001)
    urgent = asyncio.create_task(gate.run(work, "urgent", priority=0))
    await asyncio.gather(first, urgent, *later)
    assert order == ["busy", "urgent", "later0", "later1"]
    assert peak == 1
    gate.close()


async def test_a_cancelled_waiter_does_not_lose_the_slot() -> None:
    gate = Gate("test", 1)
    blocker = asyncio.create_task(gate.run(time.sleep, 0.05))
    await asyncio.sleep(0.005)
    waiter = asyncio.create_task(gate.run(time.sleep, 0))
    await asyncio.sleep(0.005)
    waiter.cancel()
    await blocker
    # The slot came back: a new call runs at once.
    await asyncio.wait_for(gate.run(time.sleep, 0), 1)
    assert gate.waiting == 0
    gate.close()


async def test_a_stream_runs_ahead_only_so_far_and_stops_when_closed() -> None:
    gate = Gate("test", 1)
    made: list[int] = []
    finished = threading.Event()

    def numbers() -> Iterator[int]:
        try:
            for n in range(100):
                made.append(n)
                yield n
        finally:
            finished.set()

    stream = gate.stream(numbers, ahead=2)
    assert await anext(stream) == 0
    await asyncio.sleep(0.05)
    assert len(made) <= 4, "the worker waits for the reader"
    await stream.aclose()
    assert finished.is_set(), "closing stopped the generator in its thread"
    # The slot is free again, and a whole stream goes through with its order kept.
    assert [n async for n in gate.stream(lambda: iter(range(10)), ahead=2)] == list(range(10))
    gate.close()


async def test_a_stream_passes_on_the_generators_error() -> None:
    gate = Gate("test", 1)

    def failing() -> Iterator[str]:
        yield "one"
        raise RuntimeError("engine broke")

    got: list[str] = []
    with pytest.raises(RuntimeError, match="engine broke"):
        async for item in gate.stream(failing, ahead=2):
            got.append(item)
    assert got == ["one"]
    assert await asyncio.wait_for(gate.run(time.sleep, 0), 1) is None
    gate.close()


async def test_calls_their_wait_and_busy_time_are_counted_for_metrics() -> None:
    gate = Gate("test-counted", 1)

    def take(seconds: float) -> None:
        time.sleep(seconds)

    def items() -> Iterator[int]:
        time.sleep(0.05)
        yield 1

    try:
        assert gate in Gate.live
        await asyncio.gather(gate.run(take, 0.05), gate.run(take, 0.05))
        async for _ in gate.stream(items, ahead=1):
            pass
        assert gate.calls == 3
        assert gate.busy_s >= 0.15, "each call held the engine for at least its sleep"
        assert gate.waited_s >= 0.03, "the second call waited for the first"
        assert gate.waiting == 0
    finally:
        gate.close()


async def test_a_call_past_its_timeout_frees_its_caller_but_not_its_slot() -> None:
    gate = Gate("t", concurrency=1)
    unstuck = threading.Event()
    try:
        with pytest.raises(TimeoutError):
            await gate.run(unstuck.wait, 30, timeout_s=0.2)
        # The hung thread still holds the one slot: the next call waits for it...
        after = asyncio.create_task(gate.run(lambda: "next"))
        await asyncio.sleep(0.3)
        assert not after.done() and gate.waiting == 1
        # ...and runs once the hung call returns.
        unstuck.set()
        assert await asyncio.wait_for(after, 5) == "next"
        assert gate.waiting == 0 and gate._free == 1
    finally:
        unstuck.set()
        gate.close()
