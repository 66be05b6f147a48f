from __future__ import annotations

import asyncio
import threading
import time

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
