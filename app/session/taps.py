"""Who else hears a call's audio besides the agent: its recording, a Live sideband. The
caller's as it arrives (before any mute), the agent's as each piece starts playing."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from app.session.speaking.audio_out import AudioOut


class AudioTap(Protocol):
    def heard(self, pcm16k: bytes) -> None:
        """The caller's audio: 16 kHz mono s16."""
        ...

    def played(self, pcm: bytes, rate: int) -> None:
        """The agent's, as it starts playing."""
        ...

    def cut(self) -> None:
        """What was queued to play and not played (an interruption) was not heard."""
        ...


class Taps:
    def __init__(self) -> None:
        self._taps: list[AudioTap] = []

    def __bool__(self) -> bool:
        return bool(self._taps)

    def add(self, tap: AudioTap) -> None:
        self._taps.append(tap)

    def remove(self, tap: AudioTap) -> None:
        if tap in self._taps:
            self._taps.remove(tap)

    def heard(self, pcm16k: bytes) -> None:
        for tap in list(self._taps):
            tap.heard(pcm16k)

    def played(self, pcm: bytes, rate: int) -> None:
        for tap in list(self._taps):
            tap.played(pcm, rate)

    def cut(self) -> None:
        for tap in list(self._taps):
            tap.cut()


class TappedOut:
    """A session's AudioOut, with what it plays told to its taps."""

    def __init__(self, audio: AudioOut, taps: Taps) -> None:
        self._audio = audio
        self._taps = taps
        self.rate = audio.rate

    @property
    def played_samples(self) -> int:
        return self._audio.played_samples

    @property
    def playing(self) -> bool:
        return self._audio.playing

    async def write(
        self, pcm: bytes, on_start: Callable[[], None] | None = None, *, session_id: str = ""
    ) -> int:
        if not self._taps:
            return await self._audio.write(pcm, on_start, session_id=session_id)

        def started() -> None:
            self._taps.played(pcm, self.rate)
            if on_start is not None:
                on_start()

        return await self._audio.write(pcm, started, session_id=session_id)

    def pause(self) -> bool:
        return self._audio.pause()

    def resume(self) -> None:
        self._audio.resume()

    def clear(self) -> int:
        self._taps.cut()
        return self._audio.clear()

    async def wait_drained(self) -> None:
        await self._audio.wait_drained()
