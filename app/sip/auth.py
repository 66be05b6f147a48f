"""Who may call over SIP: an allowlist of source networks, and digest authentication
(RFC 3261 22, RFC 2617's MD5 with qop=auth, which every SIP phone and PBX speaks).

Nonces are stateless: a timestamp signed with a per-process key, good for NONCE_TTL_S.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import re
import secrets
import time

NONCE_TTL_S = 300
FIELD = re.compile(r'(\w+)\s*=\s*(?:"([^"]*)"|([^\s,]+))')


class SourceFilter:
    def __init__(self, networks: list[str]) -> None:
        self._networks = [ipaddress.ip_network(net, strict=False) for net in networks]

    def allows(self, host: str) -> bool:
        if not self._networks:
            return True
        try:
            address = ipaddress.ip_address(host)
        except ValueError:
            return False
        return any(address in network for network in self._networks)


class DigestAuth:
    def __init__(self, username: str, password: str, realm: str) -> None:
        self.realm = realm
        self._username = username
        self._ha1 = _md5(f"{username}:{realm}:{password}")
        self._key = secrets.token_bytes(16)

    def challenge(self, *, stale: bool = False) -> str:
        """A WWW-Authenticate value with a fresh nonce."""
        stamp = str(int(time.time()))
        nonce = f"{stamp}.{self._sign(stamp)}"
        value = f'Digest realm="{self.realm}", nonce="{nonce}", algorithm=MD5, qop="auth"'
        return value + (", stale=true" if stale else "")

    def check(self, method: str, authorization: str | None) -> str:
        """ "ok", "stale" (a good answer to an expired nonce: challenge again), or "bad"."""
        if authorization is None or not authorization.lower().startswith("digest "):
            return "bad"
        fields = {m[1].lower(): m[2] if m[2] is not None else m[3]
                  for m in FIELD.finditer(authorization[7:])}  # fmt: skip
        nonce, uri = fields.get("nonce", ""), fields.get("uri", "")
        if fields.get("username") != self._username or fields.get("realm") != self.realm:
            return "bad"
        ha2 = _md5(f"{method}:{uri}")
        if fields.get("qop") == "auth":
            nc, cnonce = fields.get("nc", ""), fields.get("cnonce", "")
            expected = _md5(f"{self._ha1}:{nonce}:{nc}:{cnonce}:auth:{ha2}")
        else:
            expected = _md5(f"{self._ha1}:{nonce}:{ha2}")
        if not hmac.compare_digest(expected, fields.get("response", "")):
            return "bad"
        stamp, _, signature = nonce.partition(".")
        if not hmac.compare_digest(signature, self._sign(stamp)):
            return "bad"
        return "ok" if stamp.isdigit() and time.time() - int(stamp) < NONCE_TTL_S else "stale"

    def _sign(self, stamp: str) -> str:
        return hmac.new(self._key, stamp.encode(), hashlib.sha256).hexdigest()[:32]


def _md5(text: str) -> str:
    return hashlib.md5(text.encode()).hexdigest()  # noqa: S324 - the digest scheme's own hash
