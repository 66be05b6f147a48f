"""Who may call over SIP: an allowlist of source networks, and digest authentication
(RFC 3261 22, RFC 2617's MD5 with qop=auth, which every SIP phone and PBX speaks).

Nonces are signed, not stored: a timestamp (ns), a salt and an HMAC over them and the
caller's address and Call-ID, good for NONCE_TTL_S for that call from that address.
What is stored is each used nonce's highest nc, so a captured answer cannot be replayed;
that memory is bounded, and nonces older than what it forgot count as stale.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import logging
import secrets
import time
from collections import OrderedDict

from app.telephony.sip.message import MAX_VALUE_CHARS

NONCE_TTL_S = 300
MAX_NONCES = 4096  # used nonces whose nc is remembered
MAX_CREDENTIALS_CHARS = MAX_VALUE_CHARS["Authorization"]
NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789-_")
HEX = frozenset("0123456789abcdefABCDEF")
DROPPED_LOG_S = 10.0  # sources outside sip.allow: one log line at most this often

log = logging.getLogger(__name__)


class SourceFilter:
    def __init__(self, networks: list[str]) -> None:
        self._networks = [ipaddress.ip_network(net, strict=False) for net in networks]
        self._dropped = 0  # since the last log line
        self._logged_at = -DROPPED_LOG_S

    def allows(self, host: str) -> bool:
        if not self._networks:
            return True
        try:
            address = ipaddress.ip_address(host)
        except ValueError:
            return False
        return any(address in network for network in self._networks)

    def admits(self, host: str) -> bool:
        """Whether a datagram from `host` is read at all. One from outside sip.allow is
        dropped unread and unanswered (a 403 would mean parsing whatever anyone sends,
        and answering a source that may be forged); a flood of them is one log line."""
        if self.allows(host):
            return True
        self._dropped += 1
        now = time.monotonic()
        if now - self._logged_at >= DROPPED_LOG_S:
            log.warning("SIP from %s dropped unread: not in sip.allow (%d datagrams from "
                        "outside it since the last such line)", host, self._dropped)  # fmt: skip
            self._dropped, self._logged_at = 0, now
        return False


def digest_fields(value: str) -> dict[str, str] | None:
    """The name=value pairs of a `Digest ...` header value (RFC 2617 3.2), names in
    lower case; None if it is not Digest or not well formed.

    One pass, left to right, with str.find: no pattern that could backtrack over what a
    client sent (a regular expression here once took 47 s over a 60 KB header).
    """
    scheme, _, text = value.partition(" ")
    if scheme.lower() != "digest":
        return None
    fields: dict[str, str] = {}
    at, end = 0, len(text)
    while True:
        at = _skip(text, at, " \t,")
        if at == end:
            return fields
        equals = text.find("=", at)
        name = text[at:equals].strip().lower() if equals >= 0 else ""
        if not name or not NAME_CHARS.issuperset(name):
            return None
        at = _skip(text, equals + 1, " \t")
        if text.startswith('"', at):
            close = text.find('"', at + 1)
            if close < 0:
                return None
            fields[name], at = text[at + 1 : close], close + 1
        else:
            comma = text.find(",", at)
            comma = end if comma < 0 else comma
            fields[name], at = text[at:comma].strip(), comma


def _skip(text: str, at: int, chars: str) -> int:
    while at < len(text) and text[at] in chars:
        at += 1
    return at


class DigestAuth:
    def __init__(self, username: str, password: str, realm: str) -> None:
        self.realm = realm
        self._username = username
        self._ha1 = _md5(f"{username}:{realm}:{password}")
        self._key = secrets.token_bytes(16)
        self._used: OrderedDict[str, int] = OrderedDict()  # nonce → highest nc, LRU
        self._floor = 0  # nonces stamped at or before this may be forgotten: stale

    def challenge(self, *, source: str, call_id: str, stale: bool = False) -> str:
        """A WWW-Authenticate value with a fresh nonce, for this call from `source` only."""
        stem = f"{time.time_ns()}.{secrets.token_hex(4)}"
        nonce = f"{stem}.{self._sign(stem, source, call_id)}"
        value = f'Digest realm="{self.realm}", nonce="{nonce}", algorithm=MD5, qop="auth"'
        return value + (", stale=true" if stale else "")

    def check(
        self, method: str, uri: str, authorization: str | None, *, source: str, call_id: str
    ) -> str:
        """ "ok", "stale" (a good answer to a nonce that expired or was used with this
        nc already: challenge again), or "bad"."""
        if authorization is None or len(authorization) > MAX_CREDENTIALS_CHARS:
            return "bad"
        fields = digest_fields(authorization)
        if fields is None or not self._well_formed(fields, uri):
            return "bad"
        nonce, nc = fields["nonce"], fields["nc"]
        ha2 = _md5(f"{method}:{uri}")
        expected = _md5(f"{self._ha1}:{nonce}:{nc}:{fields['cnonce']}:auth:{ha2}")
        if not _same(expected, fields.get("response", "")):
            return "bad"
        stem, _, signature = nonce.rpartition(".")
        if not _same(signature, self._sign(stem, source, call_id)):
            return "bad"  # another call's nonce, or another address's
        stamp = int(stem.partition(".")[0])
        if _expired(stamp) or stamp <= self._floor:
            return "stale"
        if int(nc, 16) <= self._used.get(nonce, 0):
            return "stale"  # a replay, or a retry: only a fresh nonce will do
        self._remember(nonce, int(nc, 16))
        return "ok"

    def _well_formed(self, fields: dict[str, str], uri: str) -> bool:
        nc = fields.get("nc", "")
        return (
            fields.get("username") == self._username
            and fields.get("realm") == self.realm
            and fields.get("uri") == uri  # the answer is for this request, not another
            and fields.get("qop") == "auth"  # RFC 2069's form has no nc to track
            and fields.get("algorithm", "MD5").upper() == "MD5"
            and bool(fields.get("cnonce"))
            and len(nc) == 8
            and HEX.issuperset(nc)
            and fields.get("nonce", "").count(".") == 2
        )

    def _remember(self, nonce: str, nc: int) -> None:
        self._used[nonce] = nc
        self._used.move_to_end(nonce)
        while self._used:
            oldest = next(iter(self._used))
            stamp = int(oldest.partition(".")[0])
            if len(self._used) <= MAX_NONCES and not _expired(stamp):
                break
            del self._used[oldest]
            if not _expired(stamp):  # forgotten while still good: stale from now on
                self._floor = max(self._floor, stamp)

    def _sign(self, stem: str, source: str, call_id: str) -> str:
        message = f"{stem}\n{source}\n{call_id}".encode()
        return hmac.new(self._key, message, hashlib.sha256).hexdigest()[:32]


def _expired(stamp_ns: int) -> bool:
    return time.time_ns() - stamp_ns >= NONCE_TTL_S * 1_000_000_000


def _same(a: str, b: str) -> bool:
    return hmac.compare_digest(a.encode(), b.encode())  # str would refuse non-ASCII


def _md5(text: str) -> str:
    return hashlib.md5(text.encode()).hexdigest()  # noqa: S324 - the digest scheme's own hash
