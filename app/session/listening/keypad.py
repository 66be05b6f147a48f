"""Telephone keypad presses (DTMF) as the caller's input.

Each key is reported at once; keys pressed close together are one entry, which ends
on '#' or after a pause, and becomes a user message the agent answers ("press 1").
"""

from __future__ import annotations

from collections.abc import Callable

from app.tasks import OneShot

KEYS = frozenset("0123456789*#ABCD")
MAX_ENTRY = 32  # longer runs are entered in pieces


def entry_text(keys: str) -> str:
    """How an entry reads in the conversation, to the LLM and to Realtime clients."""
    return f"[keypad: {keys}]"


class Keypad:
    def __init__(self, pause_ms: int, entered: Callable[[str], None]) -> None:
        self._pause_s = pause_ms / 1000
        self._entered = entered
        self._keys = ""
        self._timer = OneShot(self.flush)

    def press(self, key: str) -> None:
        """ValueError for anything that is not a DTMF key."""
        if key not in KEYS:
            raise ValueError(f"not a keypad key: {key[:8]!r}")
        self._keys += key
        if key == "#" or len(self._keys) >= MAX_ENTRY:
            self.flush()
        else:
            self._timer.start(self._pause_s)

    def flush(self) -> None:
        self._timer.cancel()
        keys, self._keys = self._keys, ""
        if keys:
            self._entered(keys)

    def close(self) -> None:
        self._timer.cancel()
