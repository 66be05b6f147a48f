"""One-time tickets for media streams: the voice webhook puts a fresh one in the stream URL
it hands the carrier, and the stream's handshake must bring it back, once, within a
minute. Twilio signs the URL it connects to, so a captured signature is then good for
one call that has already been made, not for every call to come.

Tickets are signed with a key derived from the configured credentials (the Twilio auth
token, the server's API key), so every replica behind a balancer takes the others'.
A replica remembers the tickets it took for as long as they would be valid.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time

TICKET_S = 60  # the carrier opens the stream a moment after it gets the webhook's answer
MAX_TAKEN = 100_000


class StreamTickets:
    def __init__(self, *credentials: str) -> None:
        self._key = hashlib.sha256(b"stream-ticket\0" + "\0".join(credentials).encode()).digest()
        self._taken: dict[str, float] = {}  # nonce -> when its ticket expires

    def mint(self) -> str:
        expires = str(int(time.time()) + TICKET_S)
        nonce = secrets.token_urlsafe(12)
        return f"{expires}.{nonce}.{self._sign(expires, nonce)}"

    def take(self, ticket: str) -> bool:
        """True for a ticket of ours, unexpired, not taken before (it is taken now)."""
        expires, _, rest = ticket.partition(".")
        nonce, _, mac = rest.partition(".")
        if not (expires.isdigit() and len(expires) < 12 and nonce and mac):
            return False
        if not hmac.compare_digest(mac, self._sign(expires, nonce)):
            return False
        now = time.time()
        if int(expires) <= now or nonce in self._taken:
            return False
        if len(self._taken) >= MAX_TAKEN:
            self._taken = {n: e for n, e in self._taken.items() if e > now}
            if len(self._taken) >= MAX_TAKEN:
                return False  # a flood of valid tickets: refuse rather than forget one
        self._taken[nonce] = int(expires)
        return True

    def _sign(self, expires: str, nonce: str) -> str:
        return hmac.new(self._key, f"{expires}.{nonce}".encode(), hashlib.sha256).hexdigest()[:32]
