"""Opus packets made by the track itself, so silence costs nothing to send.

Handing aiortc a Frame makes it resample to stereo, hop to a worker thread,
encode at 96 kbit/s and compute an RTP audio level in a Python loop, for every
20 ms frame of every session, including the long silences while the user talks.
Handing it an av.Packet skips all of that: we encode mono speech once, and for
silence resend one cached packet.
"""

from __future__ import annotations

from fractions import Fraction

import av

OPUS_RATE = 48_000
# Mono speech: 32 kbit/s is transparent for a voice and a third of aiortc's default.
BITRATE = 32_000
# libopus' default (10) costs ~380 us per 20 ms of speech on this class of CPU;
# 5, what libwebrtc uses on mobile, ~280 us with no audible loss for one voice.
COMPLEXITY = 5
# Silent frames sent at the normal pace after speech before the cached packet (and
# DTX) takes over: the encoder's lookahead and the word's tail go out first, and
# receivers that hold a few packets back (aiortc holds 4) get enough following
# packets to release the end of the reply now rather than 400 ms later.
SETTLE_FRAMES = 5


class OpusPacketizer:
    """20 ms of mono s16 at 48 kHz in, one av.Packet out."""

    def __init__(self, frame_samples: int) -> None:
        self.frame_samples = frame_samples
        self._time_base = Fraction(1, OPUS_RATE)
        self._codec = av.CodecContext.create("libopus", "w")
        self._codec.bit_rate = BITRATE
        self._codec.format = "s16"
        self._codec.layout = "mono"
        self._codec.sample_rate = OPUS_RATE
        self._codec.time_base = self._time_base
        self._codec.options = {"application": "voip", "compression_level": str(COMPLEXITY)}
        self._silent_run = SETTLE_FRAMES  # a fresh encoder has nothing to settle
        self._silence: bytes | None = None
        self.encoded = 0  # frames that went through the encoder (for tests and stats)

    @property
    def settled(self) -> bool:
        """Silent long enough that the next silent packet would be the cached one."""
        return self._silence is not None and self._silent_run >= SETTLE_FRAMES

    def packet(self, pcm: bytes | None, pts: int) -> av.Packet:
        """`pcm` is one frame of audio, or None for silence."""
        if pcm is None:
            self._silent_run += 1
            if self._silence is None or self._silent_run <= SETTLE_FRAMES:
                data = self._encode(bytes(self.frame_samples * 2))
                if self._silent_run >= SETTLE_FRAMES:
                    self._silence = data
            else:
                data = self._silence
        else:
            self._silent_run = 0
            data = self._encode(pcm)
        packet = av.Packet(data)
        packet.pts = pts
        packet.time_base = self._time_base
        return packet

    def _encode(self, pcm: bytes) -> bytes:
        frame = av.AudioFrame(format="s16", layout="mono", samples=self.frame_samples)
        frame.planes[0].update(pcm)
        frame.sample_rate = OPUS_RATE
        frame.pts = self.encoded * self.frame_samples
        frame.time_base = self._time_base
        self.encoded += 1
        return b"".join(bytes(p) for p in self._codec.encode(frame))
