"""Call transfer (REFER, RFC 3515): which addresses a call may be sent to, and what the
caller's NOTIFY says of the new call (a message/sipfrag status line)."""

from __future__ import annotations

import re

from app.telephony.sip.message import SipMessage

TARGET = re.compile(r"^(sips?|tel):[^\s<>\"]{1,250}$")
SIPFRAG_STATUS = re.compile(r"^SIP/2\.0 (\d{3})")


def valid_target(uri: str) -> bool:
    """A sip:, sips: or tel: URI, with nothing in it that would break the header."""
    return TARGET.match(uri) is not None


def transfer_status(notify: SipMessage) -> int | None:
    """The new call's status from a transfer's NOTIFY (None: not a transfer's, or none
    said)."""
    if not (notify.get("Event") or "").lower().startswith("refer"):
        return None
    match = SIPFRAG_STATUS.match(notify.body.decode("utf-8", errors="replace").strip())
    return int(match.group(1)) if match else None
