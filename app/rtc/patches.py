"""Where aiortc falls short for a voice server, patched: each patch names its upstream
issue, and a test fails if an aiortc upgrade moves what it patches. `apply()` makes the
process-wide ones, once, at start-up (app/main.py).

**DTLS with RSA peers** (aiortc/aiortc#1434; PRs #1392, #1421). aiortc offers only
ECDHE-ECDSA cipher suites. That is enough for browsers, whose certificates are ECDSA, but a
gateway with an RSA certificate (GStreamer's webrtcbin, several SIP/WebRTC gateways and
media servers) can then pick no suite, and the call dies in the handshake with "no shared
cipher" whenever aiortc is the DTLS client. Offering two ECDHE-RSA suites as well fixes
that: which suites a server may pick depends on the server's certificate, not on ours. The
list stays short, as aiortc wants, so the ClientHello still fits in one datagram. This
wraps a private method of aiortc's RTCCertificate (tests/rtc/test_patches.py).

**Inbound audio without the playout cushion** (aiortc/aiortc#543). aiortc's receiver holds
four audio packets (80 ms) before it decodes the first, and releases each one only when the
next arrives: a cushion for smooth playback. Audio we analyse rather than play (the user's
voice into the VAD, reply audio into a test client) gains nothing from it and pays for it
on every end of turn and every barge-in. An Opus or G.711 packet is a whole frame, so each
can go to the decoder the moment it arrives; one that comes after a later one is dropped,
which costs the VAD 20 ms of audio and nothing else. This replaces a private attribute of
each peer's receiver, so it checks what it replaces and says whether it worked.
"""

from __future__ import annotations

import logging
from typing import Any

from aiortc import RTCPeerConnection
from aiortc.jitterbuffer import JitterBuffer, JitterFrame
from aiortc.mediastreams import MediaStreamTrack
from aiortc.rtcdtlstransport import RTCCertificate
from aiortc.rtp import RtpPacket
from aiortc.utils import uint16_gt

log = logging.getLogger(__name__)


def apply() -> None:
    """The process-wide patches; calling it again changes nothing."""
    accept_rsa_peers()


# --- DTLS with RSA peers

CIPHERS = b":".join(
    [
        b"ECDHE-ECDSA-AES128-GCM-SHA256",  # RFC 8827's mandatory one, first
        b"ECDHE-ECDSA-CHACHA20-POLY1305",
        b"ECDHE-ECDSA-AES128-SHA",
        b"ECDHE-ECDSA-AES256-SHA",
        b"ECDHE-RSA-AES128-GCM-SHA256",
        b"ECDHE-RSA-AES256-GCM-SHA384",
    ]
)

_aiortcs = RTCCertificate._create_ssl_context


def _with_rsa_suites(self: RTCCertificate, *args: Any, **kwargs: Any) -> Any:
    context = _aiortcs(self, *args, **kwargs)
    context.set_cipher_list(CIPHERS)
    return context


def accept_rsa_peers() -> None:
    """Make every DTLS context aiortc creates from now on offer the RSA suites too."""
    RTCCertificate._create_ssl_context = _with_rsa_suites  # type: ignore[method-assign]


# --- inbound audio without the playout cushion

_ATTRIBUTE = "_RTCRtpReceiver__jitter_buffer"


class PassThrough(JitterBuffer):
    """Every in-order audio packet straight to the decoder; late or repeated ones dropped."""

    def __init__(self) -> None:
        super().__init__(capacity=16)
        self._last: int | None = None

    def add(self, packet: RtpPacket) -> tuple[bool, JitterFrame | None]:
        if self._last is not None and not uint16_gt(packet.sequence_number, self._last):
            return False, None
        self._last = packet.sequence_number
        data: bytes = packet._data  # type: ignore[attr-defined]  # the depayloaded frame
        return False, JitterFrame(data=data, timestamp=packet.timestamp)


def release_audio_promptly(pc: RTCPeerConnection, track: MediaStreamTrack) -> bool:
    """Call from the "track" event, before any packet has arrived."""
    for receiver in pc.getReceivers():
        if receiver.track is track and isinstance(
            getattr(receiver, _ATTRIBUTE, None), JitterBuffer
        ):
            setattr(receiver, _ATTRIBUTE, PassThrough())
            return True
    log.warning("could not bypass aiortc's audio jitter buffer; up to 80 ms more latency")
    return False
