"""How often speculation pays: a reply begun in the pause before a turn has ended is kept
when the turn ends there, and dropped when the user speaks on."""

from __future__ import annotations

import logging

from app.observability.counters import SpeculationStats
from app.session.jobs import UserTurn

log = logging.getLogger(__name__)


class Speculation:
    """The one reply a session may have begun in a pause, until the turn ends (kept) or
    the user speaks on (dropped)."""

    def __init__(self, session_id: str, stats: SpeculationStats) -> None:
        self._session_id = session_id
        self._stats = stats
        self._turn: UserTurn | None = None

    def begin(self, turn: UserTurn) -> None:
        self.abandon()
        self._turn = turn
        self._stats.started += 1
        log.debug("speculating on a pause", extra={"session_id": self._session_id})

    def keep(self, spoke_until: float | None = None) -> bool:
        """The turn ended where the speculation began (the user's speech ended at
        `spoke_until`, on time.perf_counter's clock): what waited for that goes ahead.
        False if there was none."""
        turn, self._turn = self._turn, None
        if turn is None:
            return False
        if spoke_until is not None:
            turn.timings.spoke_until(spoke_until)
        turn.confirm()
        self._stats.kept += 1
        log.debug("turn ended; speculative reply kept", extra={"session_id": self._session_id})
        return True

    def abandon(self, item_id: str | None = None) -> None:
        """Drop the speculation; with `item_id`, only if it answers that utterance (one
        judged no turn, while a later one may be speculated on already)."""
        if self._turn is None or (item_id is not None and self._turn.item_id != item_id):
            return
        turn, self._turn = self._turn, None
        turn.abandoned = True
        self._stats.dropped += 1
        if turn.task is not None:
            turn.task.cancel()
        log.debug("speculative reply dropped",
                  extra={"session_id": self._session_id})  # fmt: skip
