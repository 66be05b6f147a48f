from __future__ import annotations

from aiortc import RTCPeerConnection
from aiortc.rtp import RtpPacket

from app.rtc.jitter import PassThrough, release_audio_promptly


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
