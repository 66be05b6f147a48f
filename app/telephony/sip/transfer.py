"""Call transfer (REFER, RFC 3515): which addresses a call may be sent to, and what the
caller's NOTIFY says of the new call (a message/sipfrag status line)."""

from __future__ import annotations

import re
from collections.abc import Iterable

from app.telephony.sip.message import SipMessage

# RFC 3261's URI characters only, and no '?' (headers smuggled into the REFER the caller's
# side sends) or ',' (a second target in Refer-To).
TARGET = re.compile(r"^(sips?|tel):[A-Za-z0-9\-_.!~*'()&=+$;:@%/\[\]]{1,250}$")
# maddr sends the call somewhere other than the host the URI names (and the allowlist saw).
REROUTING = re.compile(r";\s*maddr=", re.IGNORECASE)
SIPFRAG_STATUS = re.compile(r"^SIP/2\.0 (\d{3})")


def valid_target(uri: str) -> bool:
    """A sip:, sips: or tel: URI, with nothing in it that would break the header or
    send the call elsewhere than the URI says."""
    return TARGET.match(uri) is not None and REROUTING.search(uri) is None


def allowed_target(uri: str, patterns: Iterable[str]) -> bool:
    """Whether an operator's pattern admits `uri`, case aside: '*' stands for a run of
    characters other than @ ; and : in a sip: or sips: pattern (a user part, a host, a
    port), and for digits in a tel: one. No patterns: none is."""
    return any(_pattern(p).fullmatch(uri) for p in patterns)


def _pattern(pattern: str) -> re.Pattern[str]:
    # Digits only: anything more let `tel:+1415555%2C+19005550000` (a second number)
    # through `tel:+1415555*`.
    wildcard = "[0-9]*" if pattern.lower().startswith("tel:") else "[^@;:]*"
    parts = (re.escape(part) for part in pattern.split("*"))
    return re.compile(wildcard.join(parts), re.IGNORECASE)


def transfer_status(notify: SipMessage) -> int | None:
    """The new call's status from a transfer's NOTIFY (None: not a transfer's, or none
    said)."""
    if not (notify.get("Event") or "").lower().startswith("refer"):
        return None
    match = SIPFRAG_STATUS.match(notify.body.decode("utf-8", errors="replace").strip())
    return int(match.group(1)) if match else None
