"""A fixed pool of session slots. Claiming is atomic: it never awaits."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from app.errors import SessionLimitReached

log = logging.getLogger(__name__)


class SlotState(StrEnum):
    IDLE = "idle"
    CONNECTING = "connecting"
    ACTIVE = "active"
    DRAINING = "draining"
    QUARANTINED = "quarantined"


@dataclass(slots=True)
class Slot:
    index: int
    state: SlotState = SlotState.IDLE
    session_id: str | None = None
    since: float = field(default_factory=time.monotonic)

    def move(self, state: SlotState, session_id: str | None = None) -> None:
        self.state = state
        self.session_id = session_id if state is not SlotState.IDLE else None
        self.since = time.monotonic()


class SlotPool:
    def __init__(self, size: int, retry_after_s: int) -> None:
        self.size = size
        self.retry_after_s = retry_after_s
        self._slots = [Slot(index) for index in range(size)]

    @property
    def in_use(self) -> int:
        return sum(slot.state is not SlotState.IDLE for slot in self._slots)

    @property
    def has_free(self) -> bool:
        return any(slot.state is SlotState.IDLE for slot in self._slots)

    def claim(self, session_id: str) -> Slot:
        """Take an idle slot or raise SessionLimitReached. No await: atomic on the loop."""
        for slot in self._slots:
            if slot.state is SlotState.IDLE:
                slot.move(SlotState.CONNECTING, session_id)
                return slot
        raise SessionLimitReached(self.size, self.retry_after_s)

    def activate(self, slot: Slot) -> None:
        if slot.state is SlotState.CONNECTING:
            slot.move(SlotState.ACTIVE, slot.session_id)

    def release(self, slot: Slot) -> None:
        if slot.state is not SlotState.IDLE:
            log.info("slot %d released", slot.index, extra={"session_id": slot.session_id})
            slot.move(SlotState.IDLE)

    def snapshot(self) -> dict[str, Any]:
        now = time.monotonic()
        return {
            "size": self.size,
            "in_use": self.in_use,
            "slots": [
                {
                    "index": slot.index,
                    "state": slot.state.value,
                    "session_id": slot.session_id,
                    "since_s": round(now - slot.since, 3),
                }
                for slot in self._slots
            ],
        }
