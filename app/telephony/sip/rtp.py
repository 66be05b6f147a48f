"""Plain RTP for a SIP call (RFC 3550): G.711 both ways in 20 ms packets, and RFC 4733
keypad events both ways. No SRTP and no jitter buffer: a phone or PBX on the same network
delivers in order, and the VAD copes with a lost 20 ms.

Symmetric RTP: we send to where the caller's packets come from (a caller behind NAT
cannot know its outside address), and nothing before they come: an INVITE alone must
not turn us into a stream of packets at whatever address it names. The source taken is
one from the caller's own IP (its SDP's or its signalling's; NAT changes only the port),
which no one else can then displace; or, failing that, one that sent LATCH_RUN packets
in sequence, as a PBX's separate media server does.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import secrets
import struct
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import cast

import numpy as np

from app.audio import g711
from app.audio.playout import PacedPlayout
from app.audio.resample import Resampler
from app.telephony.sip.sdp import AudioOffer
from app.vocab.pcm import INBOUND_RATE

log = logging.getLogger(__name__)

HEADER = struct.Struct("!BBHII")
VERSION = 2
FRAME_SAMPLES = 160  # 20 ms at 8 kHz
# RFC 4733 events 0-15: the keypad.
KEYS = "0123456789*#ABCD"


@dataclass(frozen=True, slots=True)
class RtpPacket:
    payload_type: int
    sequence: int
    timestamp: int
    ssrc: int
    payload: bytes
    marker: bool = False


def parse(data: bytes) -> RtpPacket | None:
    """None for anything that is not an RTP packet (RTCP, STUN, noise)."""
    if len(data) < HEADER.size:
        return None
    first, second, sequence, timestamp, ssrc = HEADER.unpack_from(data)
    if first >> 6 != VERSION or 72 <= second & 0x7F <= 76:  # 72-76 would be RTCP
        return None
    offset = HEADER.size + 4 * (first & 0x0F)
    if first & 0x10:  # a header extension: skip it
        if len(data) < offset + 4:
            return None
        offset += 4 + 4 * struct.unpack_from("!H", data, offset + 2)[0]
    end = len(data)
    if first & 0x20 and end > offset:  # padding: its length is the last byte
        end -= data[-1]
    if end < offset:
        return None
    return RtpPacket(
        second & 0x7F, sequence, timestamp, ssrc, data[offset:end], bool(second & 0x80)
    )


def build(packet: RtpPacket) -> bytes:
    second = packet.payload_type | (0x80 if packet.marker else 0)
    header = HEADER.pack(VERSION << 6, second, packet.sequence, packet.timestamp, packet.ssrc)
    return header + packet.payload


class KeyEvents:
    """RFC 4733: one key press is several packets with the same timestamp (the end one
    repeated); it is reported once, on its first packet."""

    def __init__(self) -> None:
        self._last: tuple[int, int] | None = None  # (timestamp, event) last reported

    def key(self, packet: RtpPacket) -> str | None:
        if len(packet.payload) < 4 or packet.payload[0] >= len(KEYS):
            return None
        press = (packet.timestamp, packet.payload[0])
        if press == self._last:
            return None
        self._last = press
        return KEYS[packet.payload[0]]


class KeySender:
    """RFC 4733 presses to send: each in place of 100 ms of the agent's voice, as 5
    packets of growing duration then 3 marking its end, all with its start timestamp."""

    PRESS_PACKETS = 5
    END_PACKETS = 3
    VOLUME = 10  # -10 dBm0

    def __init__(self) -> None:
        self._queue: deque[int] = deque(maxlen=32)
        self._key: int | None = None
        self._sent = 0

    def add(self, key: str) -> None:
        self._queue.append(KEYS.index(key))

    @property
    def busy(self) -> bool:
        return self._key is not None or bool(self._queue)

    def next_payload(self) -> tuple[bytes, bool, bool]:
        """The next packet's payload, whether it starts a press, whether it ends one."""
        if self._key is None:
            self._key, self._sent = self._queue.popleft(), 0
        self._sent += 1
        ending = self._sent > self.PRESS_PACKETS
        duration = min(self._sent, self.PRESS_PACKETS) * FRAME_SAMPLES
        flags = (0x80 if ending else 0) | self.VOLUME
        payload = struct.pack("!BBH", self._key, flags, duration)
        first, last = self._sent == 1, self._sent == self.PRESS_PACKETS + self.END_PACKETS
        if last:
            self._key = None
        return payload, first, last


# Ports the OS picks are odd half the time; this many odd ones in a row are kept.
EVEN_PORT_TRIES = 8
# In-sequence packets (one SSRC, consecutive numbers) that make a source from another
# IP the call's; and how many such sources are followed at once (least recent dropped).
LATCH_RUN = 5
MAX_CANDIDATES = 8


class RtpStream(asyncio.DatagramProtocol):
    """One call's media socket. `on_pcm` gets the caller's audio as 16 kHz PCM,
    `on_key` each keypad press."""

    def __init__(
        self,
        session_id: str,
        offer: AudioOffer,
        on_pcm: Callable[[bytes], None],
        on_key: Callable[[str], None],
    ) -> None:
        self.session_id = session_id
        self.offer = offer
        self._on_pcm = on_pcm
        self.on_key = on_key  # RFC 4733 here; SIP INFO presses come this way too
        self._remote: tuple[str, int] | None = None  # where the caller's RTP comes from
        self._owned = False  # the remote is at the caller's own IP: it stays
        self._callers_ips = {_ip(offer.address), _ip(offer.signalling_ip)} - {""}
        self._runs: dict[tuple[str, int], tuple[int, int, int]] = {}  # ssrc, seq, run
        self.latched = asyncio.Event()  # the caller's RTP came: we may send
        self._resampler = Resampler(INBOUND_RATE)
        self._keys = KeyEvents()
        self._keys_out = KeySender()
        self._transport: asyncio.DatagramTransport | None = None
        self._ssrc = secrets.randbits(32)
        self._sequence = secrets.randbits(16)
        self._timestamp = secrets.randbits(32)
        self.last_input_at: float | None = None
        self.packets_in = self.packets_out = 0

    async def open(self, host: str) -> int:
        """Bind on `host`, an even port as RTP prefers; return the port."""
        loop = asyncio.get_running_loop()
        for attempt in range(EVEN_PORT_TRIES):
            transport, _ = await loop.create_datagram_endpoint(lambda: self, local_addr=(host, 0))
            port = int(transport.get_extra_info("sockname")[1])
            # An odd port works too (only RTCP's convention is lost): the last one is kept.
            if port % 2 == 0 or attempt == EVEN_PORT_TRIES - 1:
                return port
            transport.close()
        raise AssertionError("unreachable")

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's UDP transport is not a subclass of asyncio's; it has the same methods.
        self._transport = cast(asyncio.DatagramTransport, transport)

    def datagram_received(self, data: bytes, addr: tuple[str, int]) -> None:
        source = (addr[0], addr[1])
        if source != self._remote and self._owned:
            return  # someone else's packets: the caller's are known
        packet = parse(data)
        if packet is None or (source != self._remote and not self._latch(source, packet)):
            return
        self.packets_in += 1
        self.last_input_at = time.monotonic()
        if packet.payload_type == self.offer.payload_type:
            pcm8k = np.frombuffer(g711.decode(packet.payload, self.offer.law), np.int16)
            self._on_pcm(self._resampler.pcm(pcm8k, g711.RATE))
        elif packet.payload_type == self.offer.dtmf_payload_type:
            key = self._keys.key(packet)
            if key is not None:
                self.on_key(key)

    def _latch(self, source: tuple[str, int], packet: RtpPacket) -> bool:
        """Whether `source`, not the call's so far, is the caller's from now on."""
        if _ip(source[0]) in self._callers_ips:
            self._owned = True
        elif self._remote is not None or self._run(source, packet) < LATCH_RUN:
            return False
        self._remote = source
        self._runs.clear()
        self.latched.set()
        log.info("SIP call's RTP comes from %s:%d", *source,
                 extra={"session_id": self.session_id})  # fmt: skip
        return True

    def _run(self, source: tuple[str, int], packet: RtpPacket) -> int:
        """How many packets in sequence `source` has sent, this one included."""
        ssrc, sequence, run = self._runs.pop(source, (0, 0, 0))
        in_sequence = packet.ssrc == ssrc and packet.sequence == (sequence + 1) & 0xFFFF
        run = run + 1 if in_sequence else 1
        self._runs[source] = (packet.ssrc, packet.sequence, run)
        if len(self._runs) > MAX_CANDIDATES:
            del self._runs[next(iter(self._runs))]
        return run

    def send_key(self, key: str) -> None:
        """Press a key to the caller (RFC 4733); ValueError for what is not a key, or a
        call that did not offer telephone-event."""
        if key not in KEYS or len(key) != 1:
            raise ValueError(f"not a keypad key: {key[:8]!r}")
        if self.offer.dtmf_payload_type is None:
            raise ValueError("the caller's phone did not offer telephone-event (RFC 4733)")
        self._keys_out.add(key)

    async def send_from(self, playout: PacedPlayout) -> None:
        """Send the agent's voice, paced by its playout, from the caller's first packet
        on, until the playout stops or the socket closes; a key pressed to the caller
        goes in place of the voice meanwhile."""
        await self.latched.wait()
        first = True
        press_at: int | None = None  # a press's packets all carry its start timestamp
        while self._transport is not None and not self._transport.is_closing():
            pcm = await playout.next_pcm()
            if not playout.live:
                return
            if self._keys_out.busy and self.offer.dtmf_payload_type is not None:
                event, starts, ends = self._keys_out.next_payload()
                press_at = self._timestamp if starts else press_at
                assert press_at is not None
                self._out(RtpPacket(self.offer.dtmf_payload_type, self._sequence, press_at,
                                    self._ssrc, event, marker=starts))  # fmt: skip
                self._timestamp = (self._timestamp + FRAME_SAMPLES) & 0xFFFFFFFF
                continue
            payload = g711.encode(pcm, self.offer.law)
            self._out(RtpPacket(self.offer.payload_type, self._sequence, self._timestamp,
                                self._ssrc, payload, marker=first))  # fmt: skip
            first = False
            self._timestamp = (self._timestamp + len(payload)) & 0xFFFFFFFF

    def _out(self, packet: RtpPacket) -> None:
        assert self._remote is not None and self._transport is not None
        self._transport.sendto(build(packet), self._remote)
        self.packets_out += 1
        self._sequence = (self._sequence + 1) & 0xFFFF

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()


def _ip(host: str) -> str:
    """An IP address as text, one spelling for each (IPv4 inside IPv6 unwrapped)."""
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return host
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return str(ip.ipv4_mapped)
    return str(ip)
