"""Which remote candidates the server will check: only ones that could carry the call,
and no more than MAX_REMOTE_CANDIDATES of them."""

from __future__ import annotations

import pytest
from aiortc.sdp import candidate_from_sdp

from app.rtc.candidates import MAX_REMOTE_CANDIDATES, keep_usable, usable


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("1 1 udp 2122260223 192.168.1.5 54321 typ host", True),
        ("1 1 udp 2122260223 127.0.0.1 54321 typ host", True),
        ("1 1 udp 2122260223 2001:db8::1 54321 typ host", True),
        ("1 1 udp 2122260223 6f2c1d0e-1111-2222-3333-444455556666.local 54321 typ host", True),
        ("1 1 udp 1686052607 203.0.113.7 40000 typ srflx raddr 0.0.0.0 rport 0", True),
        ("1 1 tcp 1518280447 192.168.1.5 9 typ host tcptype active", False),
        ("1 1 udp 2122260223 0.0.0.0 54321 typ host", False),
        ("1 1 udp 2122260223 :: 54321 typ host", False),
        ("1 1 udp 2122260223 224.0.0.1 54321 typ host", False),
        ("1 1 udp 2122260223 255.255.255.255 54321 typ host", False),
        ("1 1 udp 2122260223 victim.example.com 54321 typ host", False),
        ("1 1 udp 2122260223 192.168.1.5 0 typ host", False),
    ],
)
def test_usable_candidates(line: str, expected: bool) -> None:
    assert usable(candidate_from_sdp(line)) is expected


def test_an_offer_keeps_its_usable_candidates_up_to_the_cap() -> None:
    good = [f"a=candidate:{i} 1 udp 2122260223 10.0.{i}.1 5000{i % 10} typ host"
            for i in range(40)]  # fmt: skip
    bad = ["a=candidate:x 1 udp 2122260223 224.0.0.1 5000 typ host", "a=candidate:broken"]
    sdp = "\r\n".join(["v=0", "m=audio 9 UDP/TLS/RTP/SAVPF 111", *bad, *good, "a=mid:0", ""])
    kept = keep_usable(sdp)
    candidates = [line for line in kept.split("\r\n") if line.startswith("a=candidate:")]
    assert candidates == good[:MAX_REMOTE_CANDIDATES]
    assert kept.startswith("v=0\r\nm=audio") and kept.endswith("a=mid:0\r\n")


@pytest.mark.parametrize("ending", ["\n", "\r", "\x0b", "\x0c", "\x1c", "\u2028"])
def test_candidates_joined_by_another_line_ending_are_counted_too(ending: str) -> None:
    """aiortc splits an offer on any line ending (str.splitlines): forty candidates joined
    by bare LFs inside a CRLF offer were once one line to the cap, forty to aiortc."""
    good = [f"a=candidate:{i} 1 udp 2122260223 10.0.{i}.1 5000 typ host" for i in range(40)]
    sdp = "\r\n".join(["v=0", "m=audio 9 UDP/TLS/RTP/SAVPF 111", ending.join(good), "a=mid:0", ""])
    kept = keep_usable(sdp)
    lines = kept.splitlines()
    assert [line for line in lines if line.startswith("a=candidate:")] == good[:16]
    assert kept == "\r\n".join(lines) + "\r\n", "every line ends in CRLF"
