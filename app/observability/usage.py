"""What calls used over the process's life, for billing (/v1/usage): each session's usage
as it goes, and a ledger of the ended ones."""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass

from app.session.usage import Usage

RECENT_SESSIONS = 100


@dataclass(frozen=True, slots=True)
class SessionUsage:
    session_id: str
    transport: str
    started_at: float  # unix time
    usage: Usage
    ended_at: float | None = None

    def snapshot(self) -> dict[str, object]:
        end = self.ended_at if self.ended_at is not None else time.time()
        return {
            "session_id": self.session_id,
            "transport": self.transport,
            "live": self.ended_at is None,
            "started_at": round(self.started_at, 3),
            "duration_s": round(end - self.started_at, 3),
            **self.usage.snapshot(),
        }


class UsageLedger:
    """Usage over the process's life: every ended session in the total, the last `keep`
    of them itemized (a biller reads /v1/usage at least that often)."""

    def __init__(self, keep: int = RECENT_SESSIONS) -> None:
        self._ended = Usage()
        self._recent: deque[SessionUsage] = deque(maxlen=keep)

    def ended(self, session: SessionUsage) -> None:
        self._ended.add(session.usage)
        self._recent.appendleft(session)

    def report(self, live: list[SessionUsage]) -> dict[str, object]:
        total = Usage()
        total.add(self._ended)
        for session in live:
            total.add(session.usage)
        return {
            "total": total.snapshot(),
            "sessions": [session.snapshot() for session in [*live, *self._recent]],
        }
