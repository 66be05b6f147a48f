"""server_vad's idle_timeout_ms: after a reply has played, that long with nobody speaking
becomes an empty user turn, and the agent is asked to go on."""

from __future__ import annotations

from collections.abc import Callable

from app.tasks import OneShot


class IdleTimeout:
    def __init__(
        self,
        position_ms: Callable[[], int],
        quiet: Callable[[], bool],
        timed_out: Callable[[int, int], None],
    ) -> None:
        """`position_ms`: where the user's audio stream is; `quiet`: nobody is speaking or
        being answered; `timed_out`: called with the silence's start and end (stream ms)."""
        self._position_ms = position_ms
        self._quiet = quiet
        self._timed_out = timed_out
        self._timer = OneShot(self._fire)
        self._from_ms = 0

    def start(self, timeout_ms: int) -> None:
        self._timer.cancel()
        self._from_ms = self._position_ms()
        self._timer.start(timeout_ms / 1000)

    def cancel(self) -> None:
        self._timer.cancel()

    def _fire(self) -> None:
        if self._quiet():
            self._timed_out(self._from_ms, self._position_ms())
