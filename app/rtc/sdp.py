"""Offer checks before aiortc sees them, so bad input gets a clear 400."""

from __future__ import annotations

from aiortc.sdp import SessionDescription

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
    except (ValueError, IndexError, KeyError, StopIteration, TypeError) as exc:
        raise SignallingError(f"SDP offer could not be parsed: {exc}") from exc
    audio = [media for media in description.media if media.kind == "audio"]
    if not audio:
        raise SignallingError("SDP offer has no audio m-line")
    codecs = {codec.mimeType.lower() for codec in audio[0].rtp.codecs}
    if "audio/opus" in codecs:
        return 48_000
    if codecs & {"audio/pcmu", "audio/pcma"}:
        return 8_000
    raise SignallingError("SDP offer has no codec we speak (opus, PCMU or PCMA)")


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
