"""The user's audio when turn detection is off: it waits for the client's commit, the
newest vad.max_utterance_s of it kept."""

from __future__ import annotations

from app.vocab.pcm import BYTES_PER_MS

# A commit needs at least this much audio.
MIN_COMMIT_MS = 100


class ManualInput:
    def __init__(self, max_utterance_s: float) -> None:
        self._audio = bytearray()
        self._limit = int(max_utterance_s * 1000 * BYTES_PER_MS)

    def push(self, pcm16k: bytes) -> None:
        self._audio += pcm16k
        if len(self._audio) > self._limit:
            del self._audio[: len(self._audio) - self._limit]

    def take(self) -> bytes | None:
        """What was pushed since the last commit, or None for too little to commit."""
        if len(self._audio) < MIN_COMMIT_MS * BYTES_PER_MS:
            return None
        audio, self._audio = bytes(self._audio), bytearray()
        return audio

    def clear(self) -> None:
        self._audio.clear()
