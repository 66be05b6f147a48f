"""A fixed pool of session slots. Claiming is atomic: it never awaits."""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from app.errors import AddressLimitReached, SessionLimitReached

log = logging.getLogger(__name__)


class SlotState(StrEnum):
    IDLE = "idle"
    CONNECTING = "connecting"
    ACTIVE = "active"
    DRAINING = "draining"
    QUARANTINED = "quarantined"


# The states a client's call holds a slot in (a quarantined slot holds no call).
LIVE = (SlotState.CONNECTING, SlotState.ACTIVE, SlotState.DRAINING)


@dataclass(slots=True)
class Slot:
    index: int
    state: SlotState = SlotState.IDLE
    session_id: str | None = None
    transport: str | None = None  # how the call reached us: webrtc, whip, websocket, ...
    client: str | None = None  # who made the call, when its share of slots is capped
    since: float = field(default_factory=time.monotonic)

    def move(self, state: SlotState, session_id: str | None = None) -> None:
        self.state = state
        if state is SlotState.IDLE:
            self.session_id = self.transport = self.client = None
        else:
            self.session_id = session_id
        self.since = time.monotonic()


class SlotPool:
    """Slots are cheap (the engines are shared), so a stuck one is replaced, not nursed."""

    def __init__(self, size: int, retry_after_s: int, quarantine_s: float = 30.0) -> None:
        self.size = size
        self.retry_after_s = retry_after_s
        self.quarantine_s = quarantine_s
        self._slots = [Slot(index) for index in range(size)]
        self._heal_timers: dict[int, asyncio.TimerHandle] = {}

    @property
    def in_use(self) -> int:
        return sum(slot.state is not SlotState.IDLE for slot in self._slots)

    @property
    def has_free(self) -> bool:
        return any(slot.state is SlotState.IDLE for slot in self._slots)

    def claim(
        self, session_id: str, transport: str, client: str | None = None, client_slots: int = 0
    ) -> Slot:
        """Take an idle slot or raise SessionLimitReached. No await: atomic on the loop.

        Only idle slots are handed out: never one still draining or quarantined. With
        `client_slots`, `client` may hold at most that many (AddressLimitReached).
        """
        if client is not None and client_slots:
            held = sum(s.client == client and s.state in LIVE for s in self._slots)
            if held >= client_slots:
                raise AddressLimitReached(client, client_slots, self.retry_after_s)
        for slot in self._slots:
            if slot.state is SlotState.IDLE:
                slot.move(SlotState.CONNECTING, session_id)
                slot.transport = transport
                slot.client = client if client_slots else None
                return slot
        raise SessionLimitReached(self.size, self.retry_after_s)

    def _current(self, slot: Slot) -> bool:
        """False for a slot object that was already replaced by a fresh one."""
        return self._slots[slot.index] is slot

    def activate(self, slot: Slot) -> None:
        if self._current(slot) and slot.state is SlotState.CONNECTING:
            slot.move(SlotState.ACTIVE, slot.session_id)

    def drain(self, slot: Slot) -> None:
        if self._current(slot) and slot.state in (SlotState.CONNECTING, SlotState.ACTIVE):
            slot.move(SlotState.DRAINING, slot.session_id)

    def release(self, slot: Slot) -> None:
        if self._current(slot) and slot.state is not SlotState.IDLE:
            log.info("slot %d released", slot.index, extra={"session_id": slot.session_id})
            slot.move(SlotState.IDLE)

    def quarantine(self, slot: Slot, stuck: list[str]) -> None:
        """Take the slot out of service; a fresh one replaces it after quarantine_s."""
        if not self._current(slot):
            return
        log.error(
            "slot %d quarantined: drain did not finish (stuck: %s); rebuilt in %.0fs",
            slot.index,
            ", ".join(stuck) or "unknown",
            self.quarantine_s,
            extra={"session_id": slot.session_id},
        )
        slot.move(SlotState.QUARANTINED, slot.session_id)
        loop = asyncio.get_running_loop()
        self._heal_timers[slot.index] = loop.call_later(self.quarantine_s, self._heal, slot)

    def _heal(self, slot: Slot) -> None:
        self._heal_timers.pop(slot.index, None)
        if self._current(slot):
            # The stuck work keeps its reference to the old slot; nothing reaches the new one.
            self._slots[slot.index] = Slot(slot.index)
            log.info("slot %d rebuilt after quarantine", slot.index)

    def close(self) -> None:
        for timer in self._heal_timers.values():
            timer.cancel()
        self._heal_timers.clear()

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
                    "transport": slot.transport,
                    "since_s": round(now - slot.since, 3),
                }
                for slot in self._slots
            ],
        }
