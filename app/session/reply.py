"""One agent response as a handle: its task, its audio on the track, and what was heard.

A reply ends exactly once: its audio finished playing (completed), something
failed (failed), or it was interrupted (cancelled) by the user talking over it
or by the client. Interrupting clears the track within one frame, cancels the
task producing the reply (which closes the LLM stream and drops pending TTS),
and keeps in history only the words that went out before the cut.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from app import events
from app.errors import EndOfStream
from app.session.context import TurnContext
from app.session.history import Message, Spoken, heard_text
from app.session.timings import TurnTimings

log = logging.getLogger(__name__)

FIRST_FRAME_WAIT_S = 2.0


class Reply:
    def __init__(self, ctx: TurnContext, timings: TurnTimings) -> None:
        self.response_id = events.new_id("resp")
        self.item_id = events.new_id("item")
        self._ctx = ctx
        self._timings = timings
        # The task producing this reply; interrupt() cancels it.
        self._task = asyncio.current_task()
        # [text, first sample, end sample] on the track, per clause as queued.
        self._clauses: list[tuple[str, int, int]] = []
        self._started = asyncio.get_running_loop().create_future()
        self.created = False
        self.status = "in_progress"

    @property
    def done(self) -> bool:
        return self.status != "in_progress"

    @property
    def text(self) -> str:
        return " ".join(text for text, _, _ in self._clauses if text)

    def open(self) -> None:
        """The response becomes visible: response.created, and it can be interrupted."""
        if self.done or self.created:
            return
        self.created = True
        ctx = self._ctx
        ctx.reply = self
        ctx.audio.begin(self.response_id, self.item_id)
        item = events.assistant_item(self.item_id, "", "in_progress")
        ctx.send(events.response_created(self.response_id))
        ctx.send(events.output_item("added", self.response_id, item))
        ctx.send(events.item_added(item, ctx.history.last_item_id))
        ctx.send(events.content_part("added", self.response_id, self.item_id, ""))

    async def play(self, pcm: bytes, text: str = "") -> None:
        """Queue audio saying `text` (empty: more of the piece before, like a filter tail)."""
        if self.done:
            raise EndOfStream(f"reply {self.response_id} is {self.status}")
        if not pcm:
            return
        ctx = self._ctx
        on_start: Callable[[], None] | None = None
        if text:
            delta = text if not self.text else " " + text
            on_start = self._on_start(
                events.transcript_delta(self.response_id, self.item_id, delta)
            )
        elif not self._clauses:
            on_start = self._on_start(None)
        start = await ctx.audio.write(pcm, on_start, session_id=ctx.session_id)
        end = start + len(pcm) // 2
        if text or not self._clauses:
            self._clauses.append((text, start, end))
        else:
            last_text, last_start, _ = self._clauses[-1]
            self._clauses[-1] = (last_text, last_start, end)

    def _on_start(self, delta: events.Event | None) -> Callable[[], None]:
        def fire() -> None:  # runs inside the track's recv(), as the audio goes out
            if self.done:
                return
            if not self._started.done():
                self._timings.mark("first_frame_sent")
                self._started.set_result(None)
                self._ctx.send(events.output_audio_buffer("started", self.response_id))
            if delta is not None:
                self._ctx.send(delta)

        return fire

    async def finish_playing(self, error: str | None = None) -> None:
        """Completed (or failed, with `error`) once every queued sample has gone out.

        Until then the reply can still be interrupted.
        """
        if self._clauses:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(self._started), FIRST_FRAME_WAIT_S)
            await self._ctx.audio.wait_drained()
            if self.done:
                return
            self._ctx.send(events.output_audio_buffer("stopped", self.response_id))
        if error is None:
            self._finish("completed", self.text)
        else:
            self._finish("failed", self.text, error={"type": "server_error", "message": error})

    def interrupt(self, reason: str, *, heard_ms: float | None = None) -> bool:
        """Stop now: clear the track, cancel the work, keep what was heard.

        `heard_ms` (conversation.item.truncate) overrides the playout position.
        Returns False if the reply had already ended.
        """
        if self.done:
            return False
        ctx = self._ctx
        position = self._heard_ms(ctx.audio.played_samples)
        if self._clauses and ctx.audio.playing:
            ctx.audio.clear()
            ctx.send(events.output_audio_buffer("cleared", self.response_id))
        if self._task is not None and self._task is not asyncio.current_task():
            self._task.cancel()
        heard = position if heard_ms is None else min(heard_ms, self._audio_ms())
        timeline = self.timeline()
        self._finish("cancelled", heard_text(timeline, heard), reason=reason, heard_ms=heard)
        return True

    def timeline(self) -> tuple[Spoken, ...]:
        """Clause boundaries in ms from the start of this reply's audio."""
        if not self._clauses:
            return ()
        rate, origin = self._ctx.audio.rate, self._clauses[0][1]
        return tuple(
            Spoken(text, (start - origin) * 1000 / rate, (end - origin) * 1000 / rate)
            for text, start, end in self._clauses
        )

    def _heard_ms(self, played_samples: int) -> float:
        if not self._clauses:
            return 0.0
        origin = self._clauses[0][1]
        played = min(max(0, played_samples - origin), self._clauses[-1][2] - origin)
        return played * 1000 / self._ctx.audio.rate

    def _audio_ms(self) -> float:
        timeline = self.timeline()
        return timeline[-1].end_ms if timeline else 0.0

    def _finish(
        self,
        status: str,
        text: str,
        *,
        reason: str | None = None,
        heard_ms: float | None = None,
        error: dict[str, str] | None = None,
    ) -> None:
        self.status = status
        ctx = self._ctx
        if ctx.reply is self:
            ctx.reply = None
        if not self.created:
            return
        interrupted = status == "cancelled"
        if interrupted and heard_ms is not None and self._clauses:
            ctx.send(events.item_truncated(self.item_id, round(heard_ms)))
        previous = ctx.history.last_item_id
        if text or interrupted:
            ctx.history.add(
                Message("assistant", text, self.item_id, interrupted, self.timeline(), heard_ms)
            )
        item_status = "completed" if status == "completed" else "incomplete"
        item = events.assistant_item(self.item_id, text, item_status)
        ctx.send(events.audio_done(self.response_id, self.item_id))
        ctx.send(events.transcript_done(self.response_id, self.item_id, text))
        ctx.send(events.content_part("done", self.response_id, self.item_id, text))
        ctx.send(events.output_item("done", self.response_id, item))
        ctx.send(events.item_done(item, previous))
        ctx.send(
            events.response_done(
                self.response_id,
                status,
                output=[item],
                timings_ms=self._timings.as_ms(),
                reason=reason or ("error" if error else None),
                error=error,
            )
        )
        log.info(
            "reply %s%s: %s | %r",
            status,
            f" ({reason})" if reason else "",
            " ".join(f"{k}={v:.0f}ms" for k, v in self._timings.as_ms().items()),
            text[:80],
            extra={"session_id": ctx.session_id},
        )
