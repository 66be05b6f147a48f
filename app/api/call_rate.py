"""How fast one client address may make calls: a token bucket per address, so one client
cannot keep every slot busy with offers it never connects."""

from __future__ import annotations

import math
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable

from fastapi import FastAPI, Request

from app.config import LimitsSettings
from app.errors import RateLimited

# Addresses remembered at once; past this the least recently seen is forgotten (it
# gets a full bucket back, which errs on the side of letting calls through).
MAX_ADDRESSES = 10_000


class CallRate:
    def __init__(self, limits: LimitsSettings) -> None:
        self._per_s = limits.calls_per_minute / 60
        self._burst = float(limits.call_burst)
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()  # tokens, when

    def take(self, address: str) -> None:
        """One new call from `address`; RateLimited (with when to retry) if it has made
        too many lately."""
        if self._per_s <= 0:
            return
        now = time.monotonic()
        tokens, then = self._buckets.pop(address, (self._burst, now))
        tokens = min(self._burst, tokens + (now - then) * self._per_s)
        if tokens < 1:
            self._buckets[address] = (tokens, now)
            retry_after = math.ceil((1 - tokens) / self._per_s)
            raise RateLimited(
                f"too many new calls from {address}: at most {self._per_s * 60:g} a minute "
                f"(bursts of {self._burst:g}); retry in {retry_after} s",
                retry_after,
            )
        self._buckets[address] = (tokens - 1, now)
        while len(self._buckets) > MAX_ADDRESSES:
            self._buckets.popitem(last=False)


def limit_calls(via: str) -> Callable[[Request], Awaitable[None]]:
    """A route dependency: one new `via` call from the request's address, or 429."""

    async def dependency(request: Request) -> None:
        take_call(request.app, request.client.host if request.client else "", via)

    return dependency


def take_call(app: FastAPI, address: str, via: str) -> None:
    try:
        app.state.call_rate.take(address)
    except RateLimited:
        app.state.calls.metrics.refused(via, "rate_limited")
        raise
