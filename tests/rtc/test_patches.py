"""Our patches of aiortc: as the DTLS client against a peer whose certificate is RSA, as
GStreamer's webrtcbin and other gateways have (real OpenSSL handshakes over memory BIOs),
and inbound audio passed to the decoder packet by packet."""

from __future__ import annotations

import datetime

import pytest
from aiortc import RTCPeerConnection
from aiortc.rtcdtlstransport import SRTP_AES128_CM_SHA1_80, RTCCertificate
from aiortc.rtp import RtpPacket
from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import rsa
from OpenSSL import SSL

from app.rtc import patches
from app.rtc.patches import PassThrough, release_audio_promptly


def rsa_server() -> SSL.Connection:
    """A DTLS server with a self-signed 2048-bit RSA certificate, as a gateway has."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(x509.NameOID.COMMON_NAME, "gateway")])
    now = datetime.datetime.now(tz=datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .sign(key, hashes.SHA256())
    )
    context = SSL.Context(SSL.DTLS_METHOD)
    context.use_certificate(cert)
    context.use_privatekey(key)
    context.set_tlsext_use_srtp(b"SRTP_AES128_CM_SHA1_80")
    server = SSL.Connection(context)
    server.set_accept_state()
    return server


def aiortc_client() -> SSL.Connection:
    """aiortc's own context, from its own (ECDSA) certificate, in the client role."""
    context = RTCCertificate.generateCertificate()._create_ssl_context([SRTP_AES128_CM_SHA1_80])
    client = SSL.Connection(context)
    client.set_connect_state()
    return client


def handshake(client: SSL.Connection, server: SSL.Connection) -> str:
    """Shuttle datagrams until both ends are done; the suite they agreed on."""
    done = {"client": False, "server": False}
    for _ in range(20):
        for name, end, other in (("client", client, server), ("server", server, client)):
            if not done[name]:
                try:
                    end.do_handshake()
                    done[name] = True
                except SSL.WantReadError:
                    pass
            try:
                while True:
                    other.bio_write(end.bio_read(65536))
            except SSL.WantReadError:
                pass
        if all(done.values()):
            return str(client.get_cipher_name())
    raise AssertionError("the handshake did not finish")


def test_aiortc_alone_finds_no_cipher_an_rsa_gateway_can_use(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # What every call from such a gateway failed with before: aiortc's own suites.
    monkeypatch.setattr(RTCCertificate, "_create_ssl_context", patches._aiortcs)
    with pytest.raises(SSL.Error, match="no shared cipher"):
        handshake(aiortc_client(), rsa_server())


def test_with_the_rsa_suites_an_rsa_gateway_completes_the_handshake(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(RTCCertificate, "_create_ssl_context", patches._aiortcs)
    patches.accept_rsa_peers()
    client = aiortc_client()
    assert handshake(client, rsa_server()).startswith("ECDHE-RSA-")
    assert client.get_selected_srtp_profile() == b"SRTP_AES128_CM_SHA1_80"


def test_browsers_still_get_the_mandatory_ecdsa_suite(monkeypatch: pytest.MonkeyPatch) -> None:
    """An ECDSA server (a browser's certificate) picks the suite RFC 8827 makes mandatory."""
    monkeypatch.setattr(RTCCertificate, "_create_ssl_context", patches._aiortcs)
    patches.accept_rsa_peers()
    browser = SSL.Connection(
        RTCCertificate.generateCertificate()._create_ssl_context([SRTP_AES128_CM_SHA1_80])
    )
    browser.set_accept_state()
    assert handshake(aiortc_client(), browser) == "ECDHE-ECDSA-AES128-GCM-SHA256"


def packet(n: int) -> RtpPacket:
    out = RtpPacket(sequence_number=n % 65536, timestamp=960 * n, payload=b"x")
    out._data = bytes([n % 256])  # type: ignore[attr-defined]  # set by aiortc's receiver
    return out


async def test_the_receiver_gets_the_pass_through_buffer() -> None:
    pc = RTCPeerConnection()
    try:
        receiver = pc.addTransceiver("audio").receiver
        assert release_audio_promptly(pc, receiver.track)
        assert isinstance(receiver._RTCRtpReceiver__jitter_buffer, PassThrough)  # type: ignore[attr-defined]
    finally:
        await pc.close()


def test_each_packet_is_released_as_it_arrives_and_late_ones_are_dropped() -> None:
    buffer = PassThrough()
    out = [buffer.add(packet(n))[1] for n in (65534, 65535, 0, 1)]  # across the wrap
    assert [f.timestamp if f else None for f in out] == [960 * n for n in (65534, 65535, 0, 1)]
    assert buffer.add(packet(0))[1] is None, "late"
    assert buffer.add(packet(1))[1] is None, "repeated"
    frame = buffer.add(packet(3))[1]  # a gap is fine: the decoder conceals it
    assert frame is not None and frame.data == bytes([3])
