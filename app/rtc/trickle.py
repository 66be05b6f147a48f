"""Trickle ICE fragments (RFC 8840's application/trickle-ice-sdpfrag), as WHIP clients
PATCH them: the ICE credentials they belong to, candidates per media section, and
whether the client has sent its last one."""

from __future__ import annotations

from dataclasses import dataclass, field

from aiortc import RTCIceCandidate
from aiortc.sdp import candidate_from_sdp

from app.errors import SignallingError

MAX_LINES = 256  # a fragment carries a handful of candidates, not thousands


@dataclass(slots=True)
class IceFragment:
    ufrag: str | None = None
    pwd: str | None = None
    candidates: list[RTCIceCandidate] = field(default_factory=list)
    ended: bool = False  # a=end-of-candidates


def parse_fragment(text: str) -> IceFragment:
    """SignallingError names the first line that is not a valid fragment line."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if len(lines) > MAX_LINES:
        raise SignallingError(f"an ICE fragment of {len(lines)} lines (at most {MAX_LINES})")
    fragment = IceFragment()
    mline, mid = -1, None
    for line in lines:
        key, _, value = line.partition(":")
        match key:
            case "a=ice-ufrag":
                fragment.ufrag = value
            case "a=ice-pwd":
                fragment.pwd = value
            case "a=mid":
                mid = value
            case "a=candidate":
                fragment.candidates.append(_candidate(value, mid, mline, line))
            case "a=end-of-candidates":
                fragment.ended = True
            case _ if line.startswith("m="):
                mline, mid = mline + 1, None
            case _ if line.startswith("a=ice-options") or line.startswith("a=group"):
                pass
            case _:
                raise SignallingError(f"not a trickle-ice-sdpfrag line: {line[:80]!r}")
    return fragment


def _candidate(value: str, mid: str | None, mline: int, line: str) -> RTCIceCandidate:
    if mid is None and mline < 0:
        raise SignallingError(f"a candidate outside any media section: {line[:80]!r}")
    try:
        candidate = candidate_from_sdp(value)
    except (AssertionError, ValueError, IndexError) as exc:
        raise SignallingError(f"not an ICE candidate: {line[:80]!r}") from exc
    candidate.sdpMid = mid
    candidate.sdpMLineIndex = max(mline, 0)
    return candidate
