"""SDP for plain RTP calls (RFC 3264 offer/answer, RTP/AVP): what a phone or PBX offers,
and our answer. G.711 only (PCMU, PCMA), plus RFC 4733 telephone-event for keypad presses.
"""

from __future__ import annotations

import ipaddress
import time
from dataclasses import dataclass

from app.audio.g711 import Law

STATIC = {0: "ulaw", 8: "alaw"}  # RTP/AVP's static payload types for G.711
NAMES = {"pcmu": "ulaw", "pcma": "alaw"}
ENCODING = {"ulaw": "PCMU", "alaw": "PCMA"}
MAX_SDP_BYTES = 16 * 1024


class BadSdp(ValueError):
    """Not an SDP body we can read (400)."""


class NotAcceptable(ValueError):
    """A readable offer with nothing we can take: no audio, SRTP only, no G.711 (488)."""


@dataclass(frozen=True, slots=True)
class AudioOffer:
    address: str  # where the caller wants our RTP
    port: int
    payload_type: int  # the G.711 codec chosen, the caller's first that we speak
    law: Law
    dtmf_payload_type: int | None  # telephone-event/8000, if offered
    ptime_ms: int
    # The IP the INVITE came from (the SIP server fills it in): the caller's RTP may come
    # from there rather than from the SDP's address.
    signalling_ip: str = ""


def read_offer(sdp: str) -> AudioOffer:
    """The first audio stream of an offer, with the codec we answer in."""
    if len(sdp) > MAX_SDP_BYTES:
        raise BadSdp(f"an SDP body over {MAX_SDP_BYTES} bytes")
    lines = [line.strip() for line in sdp.splitlines() if line.strip()]
    if not lines or lines[0] != "v=0":
        raise BadSdp("an SDP body must start with v=0")
    session_address, media = None, None
    rtpmap: dict[int, str] = {}
    ptime, address = 20, None
    for line in lines:
        key, _, value = line.partition("=")
        if key == "m":
            if media is not None:
                break  # the first audio stream is ours; later ones are not answered
            if value.startswith("audio "):
                media = value.split()
        elif key == "c":
            if media is None:
                session_address = _address(value)
            else:
                address = _address(value)
        elif media is not None and key == "a":
            name, _, rest = value.partition(":")
            if name == "rtpmap":
                number, _, encoding = rest.partition(" ")
                rtpmap[_int(number, line)] = encoding.lower()
            elif name == "ptime":
                ptime = _int(rest, line)
    if media is None:
        raise NotAcceptable("the offer has no audio stream")
    if len(media) < 4:
        raise BadSdp(f"a malformed m= line: {' '.join(media)[:80]!r}")
    port, profile, formats = _int(media[1], "m="), media[2], [_int(f, "m=") for f in media[3:]]
    if profile != "RTP/AVP":
        raise NotAcceptable(f"the audio is offered as {profile}; we speak plain RTP/AVP")
    if port == 0:
        raise NotAcceptable("the audio stream is disabled (port 0)")
    address = address or session_address
    if address is None:
        raise BadSdp("the offer has no c= connection address")
    codecs = [(pt, _law(pt, rtpmap)) for pt in formats]
    chosen = [(pt, law) for pt, law in codecs if law is not None]
    if not chosen:
        offered = ", ".join(rtpmap.get(pt, str(pt)) for pt in formats)
        raise NotAcceptable(f"no common codec: offered {offered}; we speak PCMU and PCMA")
    dtmf = [pt for pt in formats if rtpmap.get(pt, "").startswith("telephone-event/8000")]
    pt, law = chosen[0]
    assert law is not None
    return AudioOffer(address, port, pt, law, dtmf[0] if dtmf else None, ptime)


def answer(offer: AudioOffer, address: str, port: int) -> str:
    """Our answer: one codec, telephone-event if offered, 20 ms packets."""
    family = "IP6" if ipaddress.ip_address(address).version == 6 else "IP4"
    formats = [offer.payload_type]
    attributes = [f"a=rtpmap:{offer.payload_type} {ENCODING[offer.law]}/8000"]
    if offer.dtmf_payload_type is not None:
        formats.append(offer.dtmf_payload_type)
        attributes += [
            f"a=rtpmap:{offer.dtmf_payload_type} telephone-event/8000",
            f"a=fmtp:{offer.dtmf_payload_type} 0-15",
        ]
    version = int(time.time())
    lines = [
        "v=0",
        f"o=voice-agent {version} {version} IN {family} {address}",
        "s=voice-agent",
        f"c=IN {family} {address}",
        "t=0 0",
        f"m=audio {port} RTP/AVP {' '.join(map(str, formats))}",
        *attributes,
        "a=ptime:20",
        "a=sendrecv",
    ]
    return "\r\n".join(lines) + "\r\n"


def _law(pt: int, rtpmap: dict[int, str]) -> Law | None:
    encoding = rtpmap.get(pt)
    if encoding is None:
        return STATIC.get(pt)  # type: ignore[return-value]
    name, _, rate = encoding.partition("/")
    if rate.split("/")[0] != "8000":
        return None
    return NAMES.get(name)  # type: ignore[return-value]


def _address(value: str) -> str:
    parts = value.split()
    if len(parts) != 3 or parts[0] != "IN" or parts[1] not in ("IP4", "IP6"):
        raise BadSdp(f"a malformed c= line: {value[:80]!r}")
    try:
        return str(ipaddress.ip_address(parts[2].split("/")[0]))
    except ValueError as exc:
        raise BadSdp(f"c= is not an IP address: {parts[2][:60]!r}") from exc


def _int(text: str, line: str) -> int:
    try:
        return int(text)
    except ValueError as exc:
        raise BadSdp(f"a number was expected in {line[:80]!r}") from exc
