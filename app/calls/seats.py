"""Seats for sideband controllers: each hears all of a call's audio, so a call, and a
client address over all calls, may hold only so many at once."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager

from app.errors import SidebandLimitReached


class SidebandSeats:
    def __init__(self, per_call: int, per_address: int) -> None:
        self.per_call = per_call
        self.per_address = per_address
        self._calls: Counter[str] = Counter()
        self._addresses: Counter[str] = Counter()

    @contextmanager
    def seat(self, call_id: str, address: str | None) -> Iterator[None]:
        """Held while a controller is attached. `address`: the one it is counted against
        (None: not held to the per-address cap). Raises SidebandLimitReached."""
        if self._calls[call_id] >= self.per_call:
            raise SidebandLimitReached(
                f"call {call_id!r} already has {self.per_call} sideband controllers, the "
                "most one call may have at once"
            )
        if address is not None and self._addresses[address] >= self.per_address:
            raise SidebandLimitReached(
                f"{address} already holds {self.per_address} sideband controllers, the "
                "most one address may at once"
            )
        self._calls[call_id] += 1
        if address is not None:
            self._addresses[address] += 1
        try:
            yield
        finally:
            _release(self._calls, call_id)
            if address is not None:
                _release(self._addresses, address)

    @property
    def held(self) -> int:
        return sum(self._calls.values())


def _release(counts: Counter[str], key: str) -> None:
    counts[key] -= 1
    if counts[key] <= 0:
        del counts[key]
