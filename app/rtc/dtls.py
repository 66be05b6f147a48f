"""aiortc's DTLS, open to peers whose certificate is RSA.

aiortc offers only ECDHE-ECDSA cipher suites. That is enough for browsers, whose
certificates are ECDSA, but a gateway with an RSA certificate (GStreamer's webrtcbin,
several SIP/WebRTC gateways and media servers) can then pick no suite, and the call dies
in the handshake with "no shared cipher" whenever aiortc is the DTLS client. Offering two
ECDHE-RSA suites as well fixes that: which suites a server may pick depends on the
server's certificate, not on ours. The list stays short, as aiortc wants, so the
ClientHello still fits in one datagram.

This wraps a private method of aiortc's RTCCertificate; tests/rtc/test_dtls.py fails if
an aiortc upgrade moves it.
"""

from __future__ import annotations

from typing import Any

from aiortc.rtcdtlstransport import RTCCertificate

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
