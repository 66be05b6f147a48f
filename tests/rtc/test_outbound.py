from __future__ import annotations

import asyncio

import numpy as np
import pytest

from app.audio.playout import PacingClock
from app.rtc.outbound import PacedAudioTrack


class FakeClock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_deadlines_are_anchored_to_the_first_frame() -> None:
    now = FakeClock()
    clock = PacingClock(48_000, 960, now=now)
    assert clock.next() == (0, 0.0)
    # The sender took 5 ms to come back: sleep only the rest of the 20 ms.
    now.t += 0.005
    pts, delay = clock.next()
    assert pts == 960 and delay == pytest.approx(0.015)
    # 1000 frames later, with a late wake-up each time, there is no drift.
    for _ in range(1000):
        now.t += delay + 0.0007
        pts, delay = clock.next()
    assert pts == 1001 * 960
    assert now.t + delay == pytest.approx(100.0 + 1001 * 0.02)


def test_a_stall_re_anchors_instead_of_bursting() -> None:
    now = FakeClock()
    clock = PacingClock(48_000, 960, max_lag_s=0.1, now=now)
    clock.next()
    now.t += 1.0  # the loop was blocked for a second
    pts, delay = clock.next()
    assert delay == 0.0
    pts, delay = clock.next()  # next frame is a full frame later, not immediately
    assert pts == 2 * 960 and delay == pytest.approx(0.02)


def pcm(seconds: float, value: int = 1000, rate: int = 48_000) -> bytes:
    return np.full(int(seconds * rate), value, dtype=np.int16).tobytes()


async def test_frames_are_20ms_with_running_pts_and_silence_when_idle() -> None:
    track = PacedAudioTrack(48_000)
    first = await track.recv()
    second = await track.recv()
    assert first.samples == 960 and first.sample_rate == 48_000
    assert (first.pts, second.pts) == (0, 960)
    assert not second.to_ndarray().any()
    track.stop()


async def test_marks_fire_when_their_audio_goes_out_and_position_advances() -> None:
    track = PacedAudioTrack(48_000)
    fired: list[str] = []
    await track.write(pcm(0.03), on_start=lambda: fired.append("a"))
    await track.write(pcm(0.03, 2000), on_start=lambda: fired.append("b"))
    frame = await track.recv()
    assert fired == ["a"] and frame.to_ndarray().max() == 1000
    frame = await track.recv()  # 10 ms of a, then b starts
    assert fired == ["a", "b"]
    assert track.played_samples == 1920
    await track.recv()
    await track.recv()
    await asyncio.wait_for(track.wait_drained(), 1)
    assert track.played_samples == track.queued_samples == 2880
    track.stop()


async def test_clear_drops_queued_audio_and_the_next_frame_is_silent() -> None:
    track = PacedAudioTrack(48_000)
    await track.write(pcm(1.0), on_start=lambda: None)
    await track.recv()
    dropped = track.clear()
    assert dropped == 48_000 - 960
    assert not (await track.recv()).to_ndarray().any()
    assert track.played_samples == track.queued_samples
    track.stop()


async def test_write_waits_while_the_buffer_is_full() -> None:
    track = PacedAudioTrack(8_000, max_buffer_s=0.1)
    await track.write(pcm(0.1, rate=8_000))
    blocked = asyncio.create_task(track.write(pcm(0.02, rate=8_000)))
    await asyncio.sleep(0.01)
    assert not blocked.done()
    await track.recv()  # one frame out makes room
    await asyncio.wait_for(blocked, 1)
    track.stop()


async def test_audio_of_another_session_is_refused() -> None:
    from app.errors import CrossedSessions

    track = PacedAudioTrack(48_000, owner="sess_a")
    await track.write(pcm(0.02), session_id="sess_a")
    with pytest.raises(CrossedSessions):
        await track.write(pcm(0.02), session_id="sess_b")
    assert track.queued_samples == 960
    track.stop()


async def test_a_pause_sends_silence_and_keeps_the_queue_until_resume_or_clear() -> None:
    track = PacedAudioTrack(48_000)
    await track.write(pcm(0.1, value=1000))  # five frames
    await track.recv()
    assert track.pause()
    for _ in range(3):
        frame = await track.recv()
        assert not frame.to_ndarray().any(), "silence while paused"
    assert track.played_samples == 960 and track.playing
    track.resume()
    voiced = [bool((await track.recv()).to_ndarray().any()) for _ in range(5)]
    assert voiced == [True, True, True, True, False], "the rest of it, none lost"
    assert track.played_samples == 4800 and not track.playing
    # clear() ends a pause too: the next reply is not held by the last one's pause.
    await track.write(pcm(0.1))
    track.pause()
    track.clear()
    await track.write(pcm(0.04))
    assert (await track.recv()).to_ndarray().any()
    track.stop()
