from __future__ import annotations

import asyncio

import numpy as np
import pytest

from app.audio.level import SILENT_DB
from app.audio.pushed_playout import SocketPlayout
from app.errors import CrossedSessions

RATE = 24_000


class Clock:
    def __init__(self) -> None:
        self.t = 50.0

    def __call__(self) -> float:
        return self.t


async def test_pieces_carry_the_reply_and_a_clock_plays_them_in_real_time() -> None:
    sent: list[bytes] = []

    async def push(pcm: bytes) -> None:
        sent.append(pcm)

    clock = Clock()
    audio = SocketPlayout("sess_a", RATE, push, now=clock)
    started: list[bool] = []
    second = bytes(2 * RATE)  # one second of silence, as pcm16
    assert await audio.write(second, lambda: started.append(True), session_id="sess_a") == 0
    assert started == [True]
    assert len(sent) == 10 and {len(piece) for piece in sent} == {2 * RATE // 10}
    assert b"".join(sent) == second
    # Half a second later half of it has played.
    clock.t += 0.5
    assert audio.playing and audio.played_samples == RATE // 2
    assert await audio.write(second, session_id="sess_a") == RATE
    # A barge-in: what was sent stays sent, but nothing more counts as heard.
    assert audio.clear() == RATE + RATE // 2
    assert not audio.playing and audio.played_samples == 2 * RATE
    with pytest.raises(CrossedSessions):
        await audio.write(second, session_id="sess_b")


async def test_a_reply_cannot_run_more_than_8_s_ahead_of_playout() -> None:
    async def push(pcm: bytes) -> None:
        return None

    audio = SocketPlayout("sess_a", RATE, push)
    await audio.write(bytes(2 * RATE * 9), session_id="sess_a")
    blocked = asyncio.create_task(audio.write(bytes(2 * RATE), session_id="sess_a"))
    await asyncio.sleep(0.1)
    assert not blocked.done(), "waits for playout to catch up"
    audio.clear()
    await asyncio.wait_for(blocked, 2)


async def test_the_output_level_follows_what_is_playing_by_the_clock() -> None:
    """For the echo guard on phone lines: the agent's voice is loud while it plays, and
    for half a second after, since echo comes back late; silence before and after."""

    async def push(pcm: bytes) -> None:
        pass

    clock = Clock()
    audio = SocketPlayout("sess_a", RATE, push, now=clock)
    assert audio.output_level_db() == SILENT_DB
    loud = (np.sin(np.arange(RATE // 2) / 5) * 16_000).astype(np.int16).tobytes()  # 0.5 s
    await audio.write(bytes(2 * RATE) + loud, session_id="sess_a")  # 1 s silence, then voice
    assert audio.output_level_db() < -90, "the silence plays first"
    clock.t += 1.2
    playing = audio.output_level_db()
    assert -12 < playing < -6  # a sine at half scale: about -9 dBFS
    clock.t += 0.7  # ended 0.2 s ago: its echo may still come
    assert audio.output_level_db() == pytest.approx(playing, abs=0.5)
    clock.t += 0.6
    assert audio.output_level_db() < -90
    await audio.write(loud, session_id="sess_a")
    audio.clear()
    assert audio.output_level_db() == SILENT_DB, "a barge-in stops the voice at once"
