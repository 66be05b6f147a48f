"""semantic_vad: at each pause in the user's speech, the turn model is asked whether
the turn is over; a finished turn ends at once instead of after the silence window.

An answer counts only if the user has not spoken since the question; if they
have, it is dropped. While one question is out, later pauses do not ask
another, so a slow machine is not buried in questions.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from app.errors import EngineError
from app.tasks import cancel_task, spawn
from app.vocab.speech import TurnModel

log = logging.getLogger(__name__)


class TurnJudge:
    def __init__(
        self,
        session_id: str,
        model: TurnModel,
        *,
        threshold: float,
        on_finished: Callable[[], None],
    ) -> None:
        self._session_id = session_id
        self._model = model
        self._threshold = threshold
        self._on_finished = on_finished
        self._speech = 0  # bumped whenever the user speaks again: older answers are stale
        self._asking: asyncio.Task[None] | None = None
        self.last_ms: float | None = None  # how long the model took to answer, last time

    def paused(self, audio: bytes) -> None:
        """The user paused: `audio` is the utterance so far."""
        if self._asking is None or self._asking.done():
            self._asking = spawn(self._ask(audio, self._speech), f"{self._session_id}:turn")

    def resumed(self) -> None:
        """The user went on, or the turn ended some other way: drop any answer due."""
        self._speech += 1

    async def _ask(self, audio: bytes, speech: int) -> None:
        started = time.perf_counter()
        try:
            probability = await self._model.complete(audio)
        except EngineError as exc:
            log.warning("turn model failed: %s", exc, extra={"session_id": self._session_id})
            return  # the silence window still ends the turn
        self.last_ms = (time.perf_counter() - started) * 1000
        finished = probability >= self._threshold
        log.debug(
            "turn model: %.2f (%s) in %.0f ms",
            probability,
            "finished" if finished else "not finished",
            self.last_ms,
            extra={"session_id": self._session_id},
        )
        if finished and speech == self._speech:
            self._on_finished()

    async def close(self) -> None:
        self.resumed()
        await cancel_task(self._asking)
