"""Trickle ICE fragments: what parse_fragment reads and refuses, and that the candidates
reach aiortc's ICE transport (so a WHIP client's PATCH is more than a 204)."""

from __future__ import annotations

import pytest
from aiortc import RTCPeerConnection

from app.errors import SignallingError
from app.rtc.peer import RtcPeer
from app.rtc.trickle import parse_fragment

FRAGMENT = (
    "a=ice-ufrag:EsAw\r\n"
    "a=ice-pwd:P2uYro0UCOQ4zxjKXaWCBui1\r\n"
    "m=audio 9 UDP/TLS/RTP/SAVPF 0\r\n"
    "a=mid:0\r\n"
    "a=candidate:1387637174 1 udp 2122260223 192.0.2.1 61764 typ host\r\n"
    "a=candidate:3471623853 1 udp 2122194687 198.51.100.2 61765 typ host\r\n"
    "a=end-of-candidates\r\n"
)


def test_a_fragment_gives_its_credentials_candidates_and_end() -> None:
    fragment = parse_fragment(FRAGMENT)
    assert (fragment.ufrag, fragment.pwd) == ("EsAw", "P2uYro0UCOQ4zxjKXaWCBui1")
    assert [(c.ip, c.port, c.sdpMid, c.sdpMLineIndex) for c in fragment.candidates] == [
        ("192.0.2.1", 61764, "0", 0),
        ("198.51.100.2", 61765, "0", 0),
    ]
    assert fragment.ended


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("a=candidate:1 1 udp 1 192.0.2.1 1 typ host\r\n", "outside any media section"),
        ("m=audio 9 RTP/AVP 0\r\na=candidate:nonsense\r\n", "not an ICE candidate"),
        ("m=audio 9 RTP/AVP 0\r\nhello\r\n", "not a trickle-ice-sdpfrag line"),
        ("a=ice-options:trickle\r\n" * 300, "at most"),
    ],
)
def test_what_is_not_a_fragment_is_refused_by_name(text: str, named: str) -> None:
    with pytest.raises(SignallingError, match=named):
        parse_fragment(text)


async def test_trickled_candidates_reach_the_ice_transport() -> None:
    caller = RTCPeerConnection()
    caller.addTransceiver("audio")
    await caller.setLocalDescription(await caller.createOffer())
    offer = "".join(
        line
        for line in caller.localDescription.sdp.splitlines(True)
        if not line.startswith(("a=candidate", "a=end-of-candidates"))
    )
    peer = RtcPeer("sess_trickle", [])
    try:
        await peer.answer(offer)
        assert peer.remote_ufrag == caller.localDescription.sdp.split("a=ice-ufrag:")[1].split()[0]
        await peer.add_candidates(parse_fragment(FRAGMENT))
        ice = peer.pc.getTransceivers()[0].receiver.transport.transport
        assert {(c.ip, c.port) for c in ice.getRemoteCandidates()} == {
            ("192.0.2.1", 61764),
            ("198.51.100.2", 61765),
        }
    finally:
        await peer.close()
        await caller.close()
