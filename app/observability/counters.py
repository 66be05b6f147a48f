"""What the process counts over every session: replies begun speculatively and what
became of them, and replies the user spoke over. /v1/stats and /metrics read them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field


@dataclass(slots=True)
class SpeculationStats:
    """Counted over every session of the process (the engines' work is shared too)."""

    started: int = 0
    kept: int = 0
    dropped: int = 0

    def snapshot(self) -> dict[str, int]:
        return asdict(self)


@dataclass(slots=True)
class InterruptionStats:
    """Counted over every session of the process."""

    paused: int = 0
    resumed: int = 0  # no turn after all: the reply went on
    cancelled: int = 0
    # Told, at each barge-in, how long the user had been speaking when the agent's audio
    # stopped (held or cut), in seconds: the server's reaction time (/metrics).
    on_reaction: Callable[[float], None] | None = field(default=None, repr=False)

    def reacted(self, spoken_ms: int) -> None:
        if self.on_reaction is not None:
            self.on_reaction(spoken_ms / 1000)

    def snapshot(self) -> dict[str, int]:
        return {"paused": self.paused, "resumed": self.resumed, "cancelled": self.cancelled}
