"""What a session's replies share: its history, its voice out and its event sender."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from app import events
from app.session.history import History
from app.session.options import SessionOptions

if TYPE_CHECKING:
    from app.session.reply import Reply


class AudioOut(Protocol):
    """Where reply audio goes: the paced WebRTC track or a WebSocket's delta events."""

    rate: int

    @property
    def played_samples(self) -> int:
        """Samples written so far that have gone out (or were cleared)."""
        ...

    async def write(
        self, pcm: bytes, on_start: Callable[[], None] | None = None, *, session_id: str = ""
    ) -> int:
        """Queue PCM at `rate` for the session `session_id` (checked against the owner)
        and return its position in the stream; raises EndOfStream once the peer is gone."""
        ...

    def clear(self) -> int: ...

    async def wait_drained(self) -> None: ...

    @property
    def playing(self) -> bool: ...

    def output_level_db(self) -> float: ...

    def begin(self, response_id: str, item_id: str) -> None:
        """The audio written next belongs to this response (a WebSocket labels it)."""
        ...


@dataclass(slots=True)
class TurnContext:
    session_id: str
    history: History
    audio: AudioOut
    send: Callable[[events.Event], None]
    options: SessionOptions
    reply: Reply | None = None  # the response the user may be hearing now
