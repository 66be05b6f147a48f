"""Which remote ICE candidates the server will send connectivity checks to.

aiortc checks every candidate an offer lists, at any address: a hostile offer could make
the server send STUN to whoever it likes. Only candidates that could ever carry the call
are kept (UDP, a real unicast address or an mDNS name, a real port), and at most
MAX_REMOTE_CANDIDATES per call; a browser offers a handful.
"""

from __future__ import annotations

import ipaddress

from aiortc import RTCIceCandidate
from aiortc.sdp import candidate_from_sdp

MAX_REMOTE_CANDIDATES = 16


def usable(candidate: RTCIceCandidate) -> bool:
    if (candidate.protocol or "").lower() != "udp" or not 0 < candidate.port < 65536:
        return False
    host = candidate.ip or ""
    if host.endswith(".local"):  # a browser hiding its address behind an mDNS name
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False  # any other name would have the server resolve it
    return not (address.is_unspecified or address.is_multicast or host == "255.255.255.255")


def keep_usable(sdp: str) -> str:
    """The offer with only usable candidate lines, at most MAX_REMOTE_CANDIDATES, its
    lines ending in CRLF. Lines are split as aiortc splits them (str.splitlines: any line
    ending), or candidates joined by another ending would pass as one line."""
    kept, lines = 0, []
    for line in sdp.splitlines():
        if line.startswith("a=candidate:"):
            try:
                candidate = candidate_from_sdp(line[len("a=candidate:") :])
            except (AssertionError, ValueError, IndexError):
                continue
            if not usable(candidate) or kept >= MAX_REMOTE_CANDIDATES:
                continue
            kept += 1
        lines.append(line)
    return "\r\n".join(lines) + "\r\n"
