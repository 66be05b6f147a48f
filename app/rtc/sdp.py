"""Offer checks before aiortc sees them, so bad input gets a clear 400."""

from __future__ import annotations

from aiortc.sdp import MediaDescription, SessionDescription

from app.errors import SignallingError

MAX_SDP_BYTES = 64 * 1024


def audio_rate_for_offer(sdp: str) -> int:
    """Validate an offer and return the clock rate our outbound audio should use.

    Opus runs at 48 kHz; offers with only G.711 (some SIP gateways) get 8 kHz so
    reply audio is resampled once, straight to what goes on the wire.
    """
    if not sdp.strip():
        raise SignallingError("SDP offer is empty")
    if len(sdp) > MAX_SDP_BYTES:
        raise SignallingError(f"SDP offer is larger than {MAX_SDP_BYTES} bytes")
    if not sdp.lstrip().startswith("v=0"):
        raise SignallingError("SDP offer must start with 'v=0'")
    try:
        description = SessionDescription.parse(sdp)
    except (ValueError, IndexError, KeyError, StopIteration, TypeError, AssertionError) as exc:
        # aiortc's own checks are assertions with no message: a value out of range.
        raise SignallingError(
            f"SDP offer could not be parsed: {exc}"
            if str(exc)
            else "SDP offer could not be parsed: a value out of range"
        ) from exc
    audio = [media for media in description.media if media.kind == "audio"]
    if not audio:
        raise SignallingError("SDP offer has no audio m-line")
    for media in description.media:
        _check_media(media)
    codecs = {codec.mimeType.lower() for codec in audio[0].rtp.codecs}
    if "audio/opus" in codecs:
        return 48_000
    if codecs & {"audio/pcmu", "audio/pcma"}:
        return 8_000
    raise SignallingError("SDP offer has no codec we speak (opus, PCMU or PCMA)")


# RFC 8122: what a DTLS fingerprint may be hashed with. MD5 and SHA-1 are not enough.
FINGERPRINT_HASHES = {"sha-256": 32, "sha-384": 48, "sha-512": 64}


def _check_media(media: MediaDescription) -> None:
    """What aiortc would trip over (its assertions surface as 500s), or should refuse."""
    for payload_type in media.fmt if media.kind in ("audio", "video") else ():
        if not isinstance(payload_type, int) or not 0 <= payload_type <= 127:
            raise SignallingError(f"m={media.kind} has payload type {payload_type!r}: 0-127")
    dtls = media.dtls
    fingerprints = dtls.fingerprints if dtls is not None else []
    # Every m-line, whatever profile it names: aiortc runs DTLS on each, and one
    # without a fingerprint could never be verified.
    if not fingerprints:
        raise SignallingError(f"m={media.kind} has no DTLS fingerprint (a=fingerprint)")
    for fingerprint in fingerprints:
        size = FINGERPRINT_HASHES.get(fingerprint.algorithm.lower())
        if size is None:
            raise SignallingError(
                f"a fingerprint hashed with {fingerprint.algorithm}: use sha-256 or stronger"
            )
        octets = fingerprint.value.split(":")
        if len(octets) != size or not all(_hex_octet(octet) for octet in octets):
            raise SignallingError(f"a malformed {fingerprint.algorithm} fingerprint")


def _hex_octet(text: str) -> bool:
    return len(text) == 2 and all(c in "0123456789abcdefABCDEF" for c in text)


def sent_audio_codec(answer_sdp: str) -> str:
    """The codec our audio goes out in: aiortc sends with the answer's first one."""
    description = SessionDescription.parse(answer_sdp)
    audio = next(media for media in description.media if media.kind == "audio")
    return str(audio.rtp.codecs[0].mimeType).lower()


def ice_ufrag(sdp: str) -> str | None:
    """The first a=ice-ufrag (session or media level): BUNDLE gives every section one."""
    for line in sdp.splitlines():
        if line.startswith("a=ice-ufrag:"):
            return line.split(":", 1)[1].strip()
    return None
