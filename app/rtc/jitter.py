"""Inbound audio without aiortc's playout cushion.

aiortc's receiver holds four audio packets (80 ms) before it decodes the
first, and releases each one only when the next arrives: a cushion for smooth
playback. Audio we analyse rather than play (the user's voice into the VAD,
reply audio into a test client) gains nothing from it and pays for it on every
end of turn and every barge-in. An Opus or G.711 packet is a whole frame, so
each can go to the decoder the moment it arrives; one that comes after a later
one is dropped, which costs the VAD 20 ms of audio and nothing else.

This replaces a private attribute of aiortc's receiver, so it checks what it
replaces and says whether it worked; tests/rtc/test_jitter.py fails if an
aiortc upgrade moves it.
"""

from __future__ import annotations

import logging

from aiortc import RTCPeerConnection
from aiortc.jitterbuffer import JitterBuffer, JitterFrame
from aiortc.mediastreams import MediaStreamTrack
from aiortc.rtp import RtpPacket
from aiortc.utils import uint16_gt

log = logging.getLogger(__name__)

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
