"""How often speculation pays: a reply begun in the pause before a turn has ended is kept
when the turn ends there, and dropped when the user speaks on."""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(slots=True)
class SpeculationStats:
    """Counted over every session of the process (the engines' work is shared too)."""

    started: int = 0
    kept: int = 0
    dropped: int = 0

    def snapshot(self) -> dict[str, int]:
        return asdict(self)
