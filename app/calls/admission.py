"""Who may start a call now, by where it comes from: how fast one client address may make
new calls (a token bucket per address), whichever way they come in; how many slots one
address may hold at once is the pool's to count (pool.py).

A client is its IPv4 address, or the /64 its IPv6 address is in: one host usually holds
a whole /64, and could otherwise take a fresh address for every call.
"""

from __future__ import annotations

import ipaddress
import math
import time
from collections import OrderedDict
from dataclasses import dataclass

from app.config import LimitsSettings
from app.errors import RateLimited

# Addresses remembered at once; past this the least recently seen is forgotten (it
# gets a full bucket back, which errs on the side of letting calls through).
MAX_ADDRESSES = 10_000
IPV6_PREFIX = 64


@dataclass(frozen=True, slots=True)
class Caller:
    """Who is making a call, as far as its admission goes."""

    address: str | None = None  # a client_key; None where there is none (a test's own)
    # Came with an operator's credential (the server's API key, a SIP trunk's allowlist or
    # digest, a carrier's signature): one such address carries many callers, so it is
    # held to neither the rate nor the share of slots one address may have.
    vouched: bool = False

    @property
    def limited(self) -> bool:
        return self.address is not None and not self.vouched


ANYONE = Caller()


def is_loopback(client: str) -> bool:
    """Whether a client_key is this machine itself: 127.0.0.0/8, or ::1's /64 (which holds
    nothing else a peer can connect from)."""
    if client == "::/64":
        return True
    try:
        return ipaddress.ip_address(client).is_loopback
    except ValueError:
        return False


def address_share(limits: LimitsSettings, slots: int) -> int:
    """Slots one client address may hold at once (limits.address_slots); 0: no limit."""
    share = limits.address_slots
    return 0 if share >= 1 else math.ceil(share * slots)


def client_key(address: str) -> str:
    """What a client is counted as: its IPv4 address, or its IPv6 /64."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return address
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.ip_network(f"{ip}/{IPV6_PREFIX}", strict=False))
    return str(ip)


class RateLimit:
    """So many of `what` per client a minute, on average, in bursts of `burst`: `take` one,
    or RateLimited with when to retry. `per_minute` 0: no limit."""

    def __init__(self, per_minute: float, burst: int, what: str) -> None:
        self._per_s = per_minute / 60
        self._burst = float(burst)
        self._what = what
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()  # tokens, when

    @classmethod
    def of_calls(cls, limits: LimitsSettings) -> RateLimit:
        return cls(limits.calls_per_minute, limits.call_burst, "new calls")

    def take(self, client: str) -> None:
        """One more from `client` (a client_key); RateLimited if it had too many lately."""
        if self._per_s <= 0:
            return
        now = time.monotonic()
        tokens, then = self._buckets.pop(client, (self._burst, now))
        tokens = min(self._burst, tokens + (now - then) * self._per_s)
        if tokens < 1:
            self._buckets[client] = (tokens, now)
            retry_after = math.ceil((1 - tokens) / self._per_s)
            raise RateLimited(
                f"too many {self._what} from {client}: at most {self._per_s * 60:g} a minute "
                f"(bursts of {self._burst:g}); retry in {retry_after} s",
                retry_after,
            )
        self._buckets[client] = (tokens - 1, now)
        while len(self._buckets) > MAX_ADDRESSES:
            self._buckets.popitem(last=False)

    def refund(self, client: str) -> None:
        """Give back one taken from `client`, for a call about to be counted again: a SIP
        call is counted when its INVITE comes, and claims its slot at the ACK."""
        if client in self._buckets:
            tokens, then = self._buckets[client]
            self._buckets[client] = (min(self._burst, tokens + 1), then)
