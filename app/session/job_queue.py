"""The agent's work, one job at a time: the jobs waiting (bounded) and the one being
answered, run by a worker task of the session's."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import Any

from app.session.jobs import Job, UserTurn
from app.session.speaking.reply import Reply
from app.tasks import cancel_task, spawn

log = logging.getLogger(__name__)

# Finished user turns (and requested replies) waiting for the agent. If the user
# keeps talking while a reply is still running, the oldest waiting one is dropped
# (and the client told).
JOB_QUEUE_SIZE = 2

Answer = Callable[[Job], Coroutine[Any, Any, None]]


class JobQueue:
    def __init__(self, session_id: str, answer: Answer, done: Callable[[Job], None]) -> None:
        """`answer` runs a job (in a task of its own); `done` hears of each once it has."""
        self._session_id = session_id
        self._answer = answer
        self._done = done
        self._waiting: asyncio.Queue[Job] = asyncio.Queue(maxsize=JOB_QUEUE_SIZE)
        self.current: Job | None = None  # the one being answered
        self._worker: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._worker = spawn(self._run(), f"{self._session_id}:turns")

    @property
    def reply(self) -> Reply | None:
        """The reply the user may be hearing now."""
        reply = self.current.reply if self.current is not None else None
        return reply if reply is not None and reply.live else None

    @property
    def spoken_over(self) -> Reply | None:
        """The reply the user's speech may interrupt: the one they may be hearing, or one
        not heard yet (its turn still being transcribed, or its first audio still being
        made), which their words may yet take over. Not one begun in a pause of the turn
        still being spoken, which is the speculation's to drop."""
        job = self.current
        if job is None or (isinstance(job, UserTurn) and not job.ended):
            return None
        return job.reply if job.reply is not None and not job.reply.done else None

    @property
    def busy(self) -> bool:
        """A job is being answered, or one is waiting. One whose reply has ended (its
        ReplyEnded is out, its history written) does not count while its task winds down:
        a client may ask for the next reply as soon as it hears the last one is done."""
        job = self.current
        answering = job is not None and not (job.reply is not None and job.reply.done)
        return answering or self.waiting

    @property
    def waiting(self) -> bool:
        return not self._waiting.empty()

    def put(self, job: Job) -> bool:
        """Queue `job`; False when the oldest job waiting was dropped to make room."""
        dropped = self._waiting.full()
        if dropped:
            self._waiting.get_nowait().abandoned = True
        self._waiting.put_nowait(job)
        return not dropped

    def tasks(self) -> list[asyncio.Task[None]]:
        """What still runs: the worker, and the current job's task."""
        job_task = self.current.task if self.current is not None else None
        return [t for t in (self._worker, job_task) if t is not None and not t.done()]

    async def _run(self) -> None:
        while True:
            job = await self._waiting.get()
            if job.abandoned:
                continue
            if job.session_id != self._session_id:  # tagged where made, checked where run
                log.error(
                    "dropped a turn of %s", job.session_id, extra={"session_id": self._session_id}
                )
                continue
            self.current = job
            # A child task, so a speculative answer can be cancelled without the worker.
            job.task = asyncio.create_task(self._answer(job), name=f"{self._session_id}:reply")
            try:
                await asyncio.wait([job.task])
            finally:
                self.current = None
                await cancel_task(job.task)
            self._done(job)
