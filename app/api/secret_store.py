"""Minted client secrets, in memory (a restart revokes them all), in two quotas: the API's
(minted with the server's key) and the page's (POST /v1/page/client_secret, anyone who
reaches it). A full quota refuses a new secret rather than evict one still in use, so a
flood of page mints cannot push out an operator's own.

An expired secret no longer opens calls, but is remembered for as long as a call made
with it may last, so that it can still hang its own call up.
"""

from __future__ import annotations

import heapq
import math
import secrets
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Literal

from app.calls.call import CallConfig
from app.errors import RateLimited

SECRET_PREFIX = "ek_"
Kind = Literal["api", "page"]
# Outstanding (minted, not expired) secrets per quota, and the bytes of session config
# the API's may carry in all (a secret holds its config as objects, several times its JSON).
QUOTAS: dict[Kind, int] = {"api": 10_000, "page": 1_000}
SESSION_BYTES = 16 * 1024 * 1024
RETIRED = 10_000  # expired secrets remembered for hanging up, the oldest forgotten first


@dataclass(frozen=True, slots=True)
class Secret:
    expires_at: float  # time.time()
    changes: CallConfig | None  # the session config that comes with it
    kind: Kind = "api"
    size: int = 0  # the bytes of that config, as the client sent it


class QuotaFull(RateLimited):
    """A quota of client secrets is full until its soonest one expires."""


class ClientSecrets:
    def __init__(self, *, retire_s: float = 3600.0) -> None:
        """`retire_s`: how long an expired secret may still hang up its calls (the longest
        a call may last)."""
        self._live: dict[str, Secret] = {}
        self._expiry: list[tuple[float, str]] = []  # a heap: the soonest to expire first
        self._counts: dict[Kind, int] = {"api": 0, "page": 0}
        self._bytes = 0
        self._retired: OrderedDict[str, Secret] = OrderedDict()
        self._retire_s = retire_s

    def mint(
        self, seconds: int, changes: CallConfig | None, *, kind: Kind = "api", size: int = 0
    ) -> tuple[str, Secret]:
        """A new secret, good for `seconds`; QuotaFull if its quota has no room."""
        now = time.time()
        self._expire(now)
        if self._counts[kind] >= QUOTAS[kind] or self._bytes + size > SESSION_BYTES:
            retry_after = max(1, math.ceil(self._expiry[0][0] - now)) if self._expiry else 1
            what = f"{QUOTAS[kind]} {kind} client secrets"
            if self._counts[kind] < QUOTAS[kind]:
                what = f"{SESSION_BYTES // 2**20} MiB of client secrets' session config"
            raise QuotaFull(f"{what} are outstanding; retry in {retry_after} s", retry_after)
        value = SECRET_PREFIX + secrets.token_urlsafe(24)
        secret = self._live[value] = Secret(now + seconds, changes, kind, size)
        heapq.heappush(self._expiry, (secret.expires_at, value))
        self._counts[kind] += 1
        self._bytes += size
        return value, secret

    def find(self, value: str, *, expired_ok: bool = False) -> Secret | None:
        """The secret, while it has not expired; with `expired_ok`, also for a while after."""
        self._expire(time.time())
        secret = self._live.get(value)
        if secret is None and expired_ok:
            secret = self._retired.get(value)
            if secret is not None and secret.expires_at + self._retire_s < time.time():
                secret = None
        return secret

    def _expire(self, now: float) -> None:
        while self._expiry and self._expiry[0][0] <= now:
            _, value = heapq.heappop(self._expiry)
            secret = self._live.pop(value)
            self._counts[secret.kind] -= 1
            self._bytes -= secret.size
            self._retired[value] = secret
            while len(self._retired) > RETIRED:
                self._retired.popitem(last=False)
