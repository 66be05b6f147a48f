"""How many TCP connections the server holds open, in all and per client address.

Counted from the moment a connection is accepted, before a byte of it is read: idle
connections cost a file descriptor each, and the process has only so many (WebRTC's
UDP sockets need theirs too). A connection over either bound is closed at once.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable

from app.calls.admission import client_key

log = logging.getLogger(__name__)

# A refusal is logged at most this often: a flood of them would flood the log.
LOG_EVERY_S = 10.0


class ConnectionLimits:
    def __init__(self, total: int, per_address: int, exempt: Callable[[str], bool]) -> None:
        """`exempt(address)`: an address that carries many clients (a trusted proxy), held
        only to `total`."""
        self._total = total
        self._per_address = per_address
        self._exempt = exempt
        self._open: Counter[str] = Counter()
        self._count = 0
        self._logged_at = 0.0

    @property
    def open(self) -> int:
        return self._count

    def take(self, address: str) -> str | None:
        """The key a new connection from `address` is counted under, or None when it is
        one too many (the caller closes it)."""
        key = client_key(address)
        full = self._count >= self._total
        if not full and (self._open[key] < self._per_address or self._exempt(address)):
            self._open[key] += 1
            self._count += 1
            return key
        now = time.monotonic()
        if now - self._logged_at >= LOG_EVERY_S:
            self._logged_at = now
            log.warning(
                "refused a connection from %s: %s", key,
                f"{self._count} open in all" if full else f"{self._open[key]} open from it",
            )  # fmt: skip
        return None

    def give_back(self, key: str) -> None:
        self._count -= 1
        self._open[key] -= 1
        if self._open[key] <= 0:
            del self._open[key]


class Allowance:
    """A token bucket for one connection: `per_s` on average, `burst` at once. `spend`
    says whether `cost` fits; a spend that does not fit takes nothing."""

    def __init__(self, per_s: float, burst: float) -> None:
        self._per_s = per_s
        self._burst = burst
        self._tokens = burst
        self._at = time.monotonic()

    def spend(self, cost: float) -> bool:
        now = time.monotonic()
        self._tokens = min(self._burst, self._tokens + (now - self._at) * self._per_s)
        self._at = now
        if cost > self._tokens:
            return False
        self._tokens -= cost
        return True
