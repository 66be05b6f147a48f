"""The session's work queue: one job at a time, in order, bounded by dropping the oldest."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from app.session.job_queue import JOB_QUEUE_SIZE, JobQueue
from app.session.jobs import Job, ReplyRequest


class Agent:
    """Answers a job when told to, and notes what it answered and what was reported."""

    def __init__(self) -> None:
        self.started: list[Job] = []
        self.done: list[Job] = []
        self.go_on = asyncio.Event()
        self._changed = asyncio.Event()

    async def answer(self, job: Job) -> None:
        self.started.append(job)
        self._changed.set()
        await self.go_on.wait()
        self.go_on.clear()

    def report(self, job: Job) -> None:
        self.done.append(job)
        self._changed.set()

    async def until(self, ready: Callable[[], bool]) -> None:
        async with asyncio.timeout(5):
            while not ready():
                self._changed.clear()
                await self._changed.wait()

    async def until_started(self, count: int) -> None:
        await self.until(lambda: len(self.started) >= count)


async def test_jobs_run_one_at_a_time_in_order_and_a_full_queue_drops_the_oldest() -> None:
    agent = Agent()
    queue = JobQueue("s1", agent.answer, agent.report)
    queue.start()
    try:
        first = ReplyRequest("s1")
        assert queue.put(first) and queue.busy
        await agent.until_started(1)
        assert queue.current is first and not queue.waiting
        waiting = [ReplyRequest("s1") for _ in range(JOB_QUEUE_SIZE)]
        assert all(queue.put(job) for job in waiting)
        last = ReplyRequest("s1")
        assert not queue.put(last), "full: the oldest waiting makes room"
        assert waiting[0].abandoned and not last.abandoned
        for expected in [*waiting[1:], last]:
            agent.go_on.set()
            await agent.until_started(len(agent.started) + 1)
            assert agent.started[-1] is expected
        agent.go_on.set()
        await agent.until(lambda: not queue.busy)
        assert agent.started == [first, *waiting[1:], last]
        assert agent.done == agent.started, "each reported once its task is done"
        assert all(job.task is not None and job.task.done() for job in agent.done)
    finally:
        for task in queue.tasks():
            task.cancel()


async def test_a_job_made_for_another_session_is_not_run() -> None:
    agent = Agent()
    queue = JobQueue("s1", agent.answer, agent.report)
    queue.start()
    try:
        queue.put(ReplyRequest("s2"))
        mine = ReplyRequest("s1")
        queue.put(mine)
        await agent.until_started(1)
        assert agent.started == [mine]
        assert len(queue.tasks()) == 2, "the worker and the job being answered"
    finally:
        for task in queue.tasks():
            task.cancel()
