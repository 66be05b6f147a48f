from __future__ import annotations

import asyncio
import base64

import pytest

from app.errors import CrossedSessions
from app.ws.audio import RATE, WebSocketAudio


class Clock:
    def __init__(self) -> None:
        self.t = 50.0

    def __call__(self) -> float:
        return self.t


async def test_deltas_carry_the_reply_and_a_clock_plays_them_in_real_time() -> None:
    sent: list[dict[str, object]] = []

    async def send(event: dict[str, object]) -> None:
        sent.append(event)

    clock = Clock()
    audio = WebSocketAudio("sess_a", send, now=clock)
    audio.begin("resp_1", "item_1")
    started: list[bool] = []
    second = bytes(2 * RATE)  # one second of silence, as pcm16
    assert await audio.write(second, lambda: started.append(True), session_id="sess_a") == 0
    assert started == [True]
    assert len(sent) == 10 and {e["response_id"] for e in sent} == {"resp_1"}
    assert sum(len(base64.b64decode(str(e["delta"]))) for e in sent) == len(second)
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
    async def send(event: dict[str, object]) -> None:
        return None

    audio = WebSocketAudio("sess_a", send)
    await audio.write(bytes(2 * RATE * 9), session_id="sess_a")
    blocked = asyncio.create_task(audio.write(bytes(2 * RATE), session_id="sess_a"))
    await asyncio.sleep(0.1)
    assert not blocked.done(), "waits for playout to catch up"
    audio.clear()
    await asyncio.wait_for(blocked, 2)
