"""How fast one client address may make calls: a token bucket per address, so one client
cannot keep every slot busy with offers it never connects."""

from __future__ import annotations

import ipaddress
import math
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable

from fastapi import Request
from starlette.requests import HTTPConnection

from app.config import LimitsSettings
from app.errors import RateLimited

# Addresses remembered at once; past this the least recently seen is forgotten (it
# gets a full bucket back, which errs on the side of letting calls through).
MAX_ADDRESSES = 10_000


class CallRate:
    def __init__(self, limits: LimitsSettings) -> None:
        self._proxies = [ipaddress.ip_network(n, strict=False) for n in limits.trusted_proxies]
        self._per_s = limits.calls_per_minute / 60
        self._burst = float(limits.call_burst)
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()  # tokens, when

    def client_of(self, connection: HTTPConnection) -> str:
        """Who is calling: the peer, or behind a trusted proxy the last address that
        X-Forwarded-For names that is not one of the proxies."""
        peer = connection.client.host if connection.client else ""
        if not self._is_proxy(peer):
            return peer
        hops = [hop.strip() for hop in connection.headers.get("x-forwarded-for", "").split(",")]
        return next((hop for hop in reversed(hops) if hop and not self._is_proxy(hop)), peer)

    def _is_proxy(self, address: str) -> bool:
        try:
            ip = ipaddress.ip_address(address)
        except ValueError:
            return False
        return any(ip in network for network in self._proxies)

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
        take_call(request, via)

    return dependency


def take_call(connection: HTTPConnection, via: str) -> None:
    """One new `via` call from whoever `connection` comes from (an HTTP request or a
    WebSocket), or RateLimited."""
    app = connection.app
    try:
        app.state.call_rate.take(app.state.call_rate.client_of(connection))
    except RateLimited:
        app.state.calls.metrics.refused(via, "rate_limited")
        raise
