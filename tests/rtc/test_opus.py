from __future__ import annotations

import asyncio

import av
import numpy as np
import pytest
from aiortc.codecs.opus import OpusDecoder
from aiortc.jitterbuffer import JitterFrame

from app.rtc.opus import SETTLE_FRAMES
from app.rtc.outbound import DTX_INTERVAL_S, PacedAudioTrack

TONE = (np.sin(np.arange(48_000) * 2 * np.pi * 300 / 48_000) * 8000).astype(np.int16)


def decode(packets: list[av.Packet]) -> np.ndarray:
    """Decode as a browser would: aiortc's own stereo Opus decoder."""
    decoder = OpusDecoder()
    out = []
    for packet in packets:
        for frame in decoder.decode(JitterFrame(data=bytes(packet), timestamp=packet.pts)):
            out.append(frame.to_ndarray().reshape(-1, 2)[:, 0])
    return np.concatenate(out).astype(np.float64)


async def test_speech_goes_out_as_opus_packets_that_decode_to_the_same_sound() -> None:
    track = PacedAudioTrack(48_000)
    track.send_opus_packets(dtx=False)
    await track.write(TONE[:9600].tobytes())  # 200 ms
    packets = [await track.recv() for _ in range(10)]
    assert all(isinstance(p, av.Packet) for p in packets)
    assert [p.pts for p in packets] == [i * 960 for i in range(10)]
    heard = decode(packets)[2000:]  # past the codec's start-up delay
    rms = np.sqrt(np.mean(heard**2))
    assert rms == pytest.approx(np.sqrt(np.mean(TONE.astype(np.float64) ** 2)), rel=0.25)
    track.stop()


async def test_silence_reuses_one_packet_after_the_encoder_settles() -> None:
    track = PacedAudioTrack(48_000)
    track.send_opus_packets(dtx=False)
    await track.write(TONE[:1920].tobytes())
    speech = [await track.recv() for _ in range(2)]
    assert track._opus is not None and track._opus.encoded == 2
    silence = [await track.recv() for _ in range(50)]
    # Only the settling frames went through the encoder; the rest are one cached packet.
    assert track._opus.encoded == 2 + SETTLE_FRAMES
    assert len({bytes(p) for p in silence[SETTLE_FRAMES:]}) == 1
    tail = decode(speech + silence)[-48_000 // 2 :]
    assert np.abs(tail).max() < 30, "the cached packet decodes to silence"
    # Speech after silence is encoded again.
    await track.write(TONE[:960].tobytes())
    await track.recv()
    assert track._opus.encoded == 3 + SETTLE_FRAMES
    track.stop()


def test_only_a_48khz_track_can_send_opus() -> None:
    with pytest.raises(ValueError, match="48000"):
        PacedAudioTrack(8_000).send_opus_packets()


async def test_dtx_spaces_out_silence_and_audio_wakes_it_at_once() -> None:
    track = PacedAudioTrack(48_000)
    track.send_opus_packets(dtx=True)
    await track.write(TONE[:1920].tobytes())
    # Speech, then silence at 20 ms until the encoder has settled.
    settling = [await track.recv() for _ in range(2 + SETTLE_FRAMES)]
    assert [p.pts for p in settling] == [i * 960 for i in range(2 + SETTLE_FRAMES)]
    # Settled: the next silent packet comes a DTX interval later, its pts showing the gap.
    quiet = await track.recv()
    dtx_frames = int(DTX_INTERVAL_S * 50)
    assert quiet.pts - settling[-1].pts >= (dtx_frames - 1) * 960
    # Reply audio written during a DTX wait goes out at the next 20 ms slot, not 400 ms later.
    waiting = asyncio.create_task(track.recv())
    await asyncio.sleep(0.05)
    await track.write(TONE[:1920].tobytes())
    speech = await waiting
    assert speech.pts - quiet.pts < (dtx_frames // 2) * 960
    assert track._opus is not None and track._opus.encoded == 2 + SETTLE_FRAMES + 1
    track.stop()


async def test_without_dtx_silence_is_sent_every_20ms() -> None:
    track = PacedAudioTrack(48_000)
    track.send_opus_packets(dtx=False)
    packets = [await track.recv() for _ in range(SETTLE_FRAMES + 5)]
    assert [p.pts for p in packets] == [i * 960 for i in range(SETTLE_FRAMES + 5)]
    track.stop()
