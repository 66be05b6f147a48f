"""MarkedPlayout: what the caller heard is what the carrier's marks say, not a clock."""

from __future__ import annotations

from app.telephony.mediastream.playout import MarkedPlayout

RATE = 8_000


class Clock:
    def __init__(self) -> None:
        self.t = 10.0

    def __call__(self) -> float:
        return self.t


async def test_heard_follows_the_echoed_marks_and_cleared_audio_is_not_heard() -> None:
    sent: list[tuple[str, int | str]] = []

    async def push_audio(pcm: bytes) -> None:
        sent.append(("media", len(pcm) // 2))

    async def push_mark(name: str) -> None:
        sent.append(("mark", name))

    clock = Clock()
    audio = MarkedPlayout("sess_a", RATE, push_audio, push_mark, now=clock)
    second = bytes(2 * RATE)
    assert await audio.write(second, session_id="sess_a") == 0
    # Pieces of 100 ms, each followed by a mark named by the position at its end.
    assert sent[:4] == [("media", 800), ("mark", "800"), ("media", 800), ("mark", "1600")]
    clock.t += 5.0  # the clock says it all played; the carrier has not said so
    assert audio.played_samples == 0 and audio.playing
    assert audio.mark_echoed("2400")
    assert audio.played_samples == 2400
    assert not audio.mark_echoed("not ours")
    # Barge-in: the carrier drops the rest and echoes its marks, which did not play.
    assert audio.clear() == RATE - 2400
    assert audio.mark_echoed("8000")
    assert audio.played_samples == RATE and not audio.playing  # dropped counts as gone
    # The next reply starts after what was cleared; its marks count again.
    assert await audio.write(second, session_id="sess_a") == RATE
    audio.mark_echoed("8800")
    assert audio.played_samples == 8800 and audio.playing
