"""How an INVITE we cannot take is refused: each reason's status, with what a caller (or a
trunk choosing another route) needs to know in its headers."""

from __future__ import annotations

import re

from app.errors import (
    AddressLimitReached,
    CallRejected,
    NotReady,
    RateLimited,
    SessionLimitReached,
)
from app.telephony.sip.sdp import BadSdp, NotAcceptable

Headers = list[tuple[str, str]]
# The refusals that are answers, not failures of ours.
REFUSED = (NotAcceptable, BadSdp, SessionLimitReached, RateLimited, NotReady, CallRejected)
# The reason phrases of the statuses an application may reject a call with (RFC 3261 21).
PHRASES = {
    403: "Forbidden", 404: "Not Found", 480: "Temporarily Unavailable", 486: "Busy Here",
    488: "Not Acceptable Here", 500: "Server Internal Error", 503: "Service Unavailable",
    600: "Busy Everywhere", 603: "Decline",
}  # fmt: skip


def refusal(exc: Exception) -> tuple[int, str, Headers]:
    """(status, reason phrase, headers) for an INVITE refused with `exc`."""
    match exc:
        case NotAcceptable():
            return 488, "Not Acceptable Here", [("Warning", warning(exc))]
        case BadSdp():
            return 400, "Bad Request", [("Warning", warning(exc))]
        case SessionLimitReached():
            return 486, "Busy Here", [("Retry-After", str(exc.retry_after_s))]
        case AddressLimitReached():
            # This address holds its share of the slots: the agent is busy, for it.
            return 486, "Busy Here", _retry_after(exc)
        case RateLimited():
            # Too many new calls from it: RFC 3261 21.5.4's "not now, retry after", which
            # a trunk also takes as a cue to try its other routes, rather than "busy".
            return 503, "Service Unavailable", _retry_after(exc)
        case NotReady():
            return 503, "Service Unavailable", [("Retry-After", "5"), ("Warning", warning(exc))]
        case CallRejected(status=status):
            return status, PHRASES.get(status, "Rejected"), [("Warning", warning(exc))]
        case _:
            return 500, "Server Internal Error", [("Warning", warning(exc))]


def warning(exc: Exception) -> str:
    """A Warning header's value (RFC 3261 20.43) saying what went wrong."""
    text = re.sub(r'["\r\n]', "'", str(exc))[:120]
    return f'399 voice-agent "{text}"'


def _retry_after(exc: RateLimited) -> Headers:
    return [("Retry-After", str(exc.retry_after_s)), ("Warning", warning(exc))]
