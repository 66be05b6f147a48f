"""One agent response as a handle: its audio on the way out, what was heard, and its end.

A reply ends exactly once: its audio finished playing (completed), something
failed (failed), or it was interrupted (cancelled) by the user talking over it
or by the client. Interrupting clears the audio within one frame, cancels the
task producing the reply (which closes the LLM stream and drops pending TTS),
and keeps in history only the words that went out before the cut. A reply is made
before its turn is transcribed and opened after: interrupted before that, it lets the
transcription finish (the user's words are kept) and is never announced. While an
interruption is being judged (listening/interruption.py) the reply may be paused, then
resumed or interrupted; however it ends, it lets go of a playout it paused.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from app.agent.timings import TurnTimings
from app.errors import EndOfStream
from app.ids import new_id
from app.session import messages as msg
from app.session.history import History, Message, Spoken, heard_text
from app.session.speaking.audio_out import AudioOut
from app.session.speaking.tool_calls import ToolCalls
from app.session.usage import Usage
from app.vocab.chat import ToolCallDelta

log = logging.getLogger(__name__)

FIRST_FRAME_WAIT_S = 2.0

Emit = Callable[[msg.SessionMessage], None]


class Reply:
    def __init__(
        self,
        session_id: str,
        *,
        task: asyncio.Task[None],
        audio: AudioOut,
        history: History,
        emit: Emit,
        timings: TurnTimings,
        modality: msg.Modality = "audio",
        usage: Usage | None = None,
        response_id: str | None = None,
    ) -> None:
        """`task` produces this reply; interrupt() cancels it. A reply is spoken
        (play()) or, with modality "text", written (write()), and may call tools (call())."""
        self.response_id = response_id or new_id("resp")
        self.item_id = new_id("item")  # its words, once it says something
        self.session_id = session_id
        self._task = task
        self._audio = audio
        self._history = history
        self._emit = emit
        self._timings = timings
        self.modality = modality
        self._usage = usage
        # (text, first sample, end sample) on the audio stream, per clause as queued.
        self._clauses: list[tuple[str, int, int]] = []
        self._written: list[str] = []
        self._started = asyncio.get_running_loop().create_future()
        self._unheld = asyncio.Event()  # cleared while paused: no more audio is made
        self._unheld.set()
        # This reply paused the audio out, and must let it go however it ends: a playout
        # left paused plays silence for every reply after it.
        self._holding = False
        self._message: msg.MessageStarted | None = None
        self._calls = ToolCalls(self.response_id, emit)
        self._approvals: list[msg.ApprovalRequested] = []
        self._outputs = 0  # output items so far
        self._previous: str | None = None  # the conversation's last item when it opened
        self.opened = False
        self.status: msg.ReplyStatus | None = None

    @property
    def rate(self) -> int:
        return self._audio.rate

    @property
    def done(self) -> bool:
        return self.status is not None

    @property
    def live(self) -> bool:
        """Visible to the client and not over: what an interruption would stop."""
        return self.opened and not self.done

    @property
    def text(self) -> str:
        if self.modality == "text":
            return "".join(self._written).strip()
        return " ".join(text for text, _, _ in self._clauses if text)

    def open(self) -> None:
        """The reply becomes visible, and can be interrupted from now on."""
        if self.done or self.opened:
            return
        self.opened = True
        self._previous = self._history.last_item_id
        self._emit(msg.ReplyStarted(self.response_id, self.modality))

    def call(
        self,
        delta: ToolCallDelta,
        *,
        server: str = "",
        approval: bool = False,
        approved: str | None = None,
    ) -> None:
        """More of a tool call: the client's, or (`server`) an MCP server's, which may need
        the client's `approval` first, or have had it (`approved`: the request's id)."""
        self._check_live()
        previous = self._calls.last_item_id or self._last_output() or self._previous
        if self._calls.add(
            delta,
            self._outputs,
            previous,
            server=server,
            approval=approval,
            approval_request_id=approved,
        ):
            self._outputs += 1

    def server_calls(self) -> tuple[list[msg.FunctionCall], list[msg.FunctionCall]]:
        """The servers' calls the LLM just made: (to run, to ask the client about)."""
        return self._calls.server_calls()

    @property
    def calls_client(self) -> bool:
        return self._calls.for_client

    def next_round(self) -> None:
        """The LLM goes on after its calls' results."""
        self._calls.next_round()

    def running(self, call: msg.FunctionCall) -> None:
        self._check_live()
        self._emit(msg.ServerCallRunning(self.response_id, call))

    def ran(self, call: msg.FunctionCall) -> None:
        """A server's call ended: its item is done, and in the conversation."""
        self._check_live()
        self._calls.ran(call)
        self._emit(msg.ServerCallEnded(self.response_id, call))
        self._history.add(Message("assistant", "", call.item_id, call=call))

    def ask(self, call: msg.FunctionCall) -> str:
        """Ask the client to approve a server's call; the request's item id."""
        self._check_live()
        previous = self._calls.last_item_id or self._last_output() or self._previous
        request = msg.ApprovalRequested(
            self.response_id,
            new_id("item"),
            call.server,
            call.name,
            call.arguments,
            self._outputs,
            previous,
        )
        self._outputs += 1
        self._approvals.append(request)
        self._emit(request)
        return request.item_id

    def write(self, delta: str) -> None:
        """More text of a written reply."""
        message = self._words()
        self._written.append(delta)
        self._emit(msg.TextWritten(self.response_id, self.item_id, message.output_index, delta))

    async def play(self, pcm: bytes, text: str = "") -> None:
        """Queue audio saying `text` (empty: more of the piece before, like a filter tail)."""
        self._check_live()
        if not pcm:
            return
        # While held, the synthesis stops here too: the next clause would compete for
        # the cores with the transcription that decides whether it is heard at all.
        await self._unheld.wait()
        self._check_live()
        message = self._words()
        on_start: Callable[[], None] | None = None
        if text:
            delta = text if not self.text else " " + text
            spoken = msg.ClauseSpoken(self.response_id, self.item_id, message.output_index, delta)
            on_start = self._on_start(spoken)
        elif not self._clauses:
            on_start = self._on_start(None)
        start = await self._audio.write(pcm, on_start, session_id=self.session_id)
        end = start + len(pcm) // 2
        if text or not self._clauses:
            self._clauses.append((text, start, end))
        else:
            last_text, last_start, _ = self._clauses[-1]
            self._clauses[-1] = (last_text, last_start, end)

    def _check_live(self) -> None:
        if self.done:
            raise EndOfStream(f"reply {self.response_id} is {self.status}")

    def _words(self) -> msg.MessageStarted:
        """The item the reply's words go in, announced with its first word."""
        self._check_live()
        if self._message is None:
            previous = self._calls.last_item_id or self._previous
            self._message = msg.MessageStarted(
                self.response_id, self.item_id, previous, self._outputs, self.modality
            )
            self._outputs += 1
            self._emit(self._message)
        return self._message

    def _last_output(self) -> str | None:
        return self._message.item_id if self._message is not None else None

    def _on_start(self, spoken: msg.ClauseSpoken | None) -> Callable[[], None]:
        def fire() -> None:  # runs as the audio goes out (inside the track's recv())
            if self.done:
                return
            if not self._started.done():
                self._timings.mark("first_frame_sent")
                self._started.set_result(None)
                self._emit(msg.ReplyAudioStarted(self.response_id))
            if spoken is not None:
                self._emit(spoken)

        return fire

    async def finish_playing(self, error: str | None = None) -> None:
        """Completed (or failed, with `error`) once every queued sample has gone out.

        Until then the reply can still be interrupted.
        """
        if self._clauses:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(FIRST_FRAME_WAIT_S):
                    await asyncio.shield(self._started)
            await self._audio.wait_drained()
            if self.done:
                return
            self._emit(msg.ReplyAudioStopped(self.response_id))
        self._finish("completed" if error is None else "failed", self.text, error=error)

    def pause(self) -> bool:
        """Hold the audio where it is, and the making of more; False if the reply is over
        or its transport cannot pause. A reply none of which is queued yet can always
        be held: it only stops making audio."""
        if self.done or self.modality != "audio":
            return False
        if self._clauses:
            if not self._audio.pause():
                return False
            self._holding = True
        self._unheld.clear()
        return True

    def resume(self) -> None:
        self._unheld.set()
        self._let_go()

    def _let_go(self) -> None:
        if self._holding:
            self._holding = False
            self._audio.resume()

    def interrupt(self, reason: msg.CancelReason, *, heard_ms: float | None = None) -> bool:
        """Stop now: clear the audio, cancel the work, keep what was heard.

        `heard_ms` (the client's truncation) overrides the playout position.
        Returns False if the reply had already ended.
        """
        if self.done:
            return False
        position = self._heard_ms(self._audio.played_samples)
        if self._clauses and self._audio.playing:
            self._audio.clear()
            self._emit(msg.ReplyAudioCleared(self.response_id))
        # Not opened yet, the reply's task is transcribing the turn it answers: that
        # goes on, so the user's words are kept, and the task sees the reply is over.
        if self._task is not asyncio.current_task() and self.opened:
            self._task.cancel()
        if self.modality == "text":  # what was written was all seen
            self._finish("cancelled", self.text, reason=reason)
            return True
        heard = position if heard_ms is None else min(heard_ms, self._audio_ms())
        self._finish("cancelled", heard_text(self.timeline(), heard), reason=reason, heard=heard)
        return True

    def timeline(self) -> tuple[Spoken, ...]:
        """Clause boundaries in ms from the start of this reply's audio."""
        if not self._clauses:
            return ()
        rate, origin = self._audio.rate, self._clauses[0][1]
        return tuple(
            Spoken(text, (start - origin) * 1000 / rate, (end - origin) * 1000 / rate)
            for text, start, end in self._clauses
        )

    def _heard_ms(self, played_samples: int) -> float:
        if not self._clauses:
            return 0.0
        origin = self._clauses[0][1]
        played = min(max(0, played_samples - origin), self._clauses[-1][2] - origin)
        return played * 1000 / self._audio.rate

    def _audio_ms(self) -> float:
        timeline = self.timeline()
        return timeline[-1].end_ms if timeline else 0.0

    def _finish(
        self,
        status: msg.ReplyStatus,
        text: str,
        *,
        reason: msg.CancelReason | None = None,
        heard: float | None = None,
        error: str | None = None,
    ) -> None:
        self.status = status
        self._unheld.set()
        self._let_go()
        if not self.opened:
            return
        if self._usage is not None:
            self._usage.replies += 1
            played_ms = heard if heard is not None else self._audio_ms()
            self._usage.audio_out_s += played_ms / 1000
        interrupted = status == "cancelled"
        calls = self._calls.finished(complete=status == "completed")
        if status == "completed" and not all(call.complete for call in calls):
            status = self.status = "failed"
            error = "the model wrote arguments for a tool call that are not a JSON object"
            self._emit(msg.Problem("invalid_tool_arguments", error))
        if self._message is not None and (text or interrupted):
            self._history.add(
                Message(
                    "assistant",
                    text,
                    self.item_id,
                    interrupted,
                    self.timeline(),
                    heard,
                    spoken=self.modality == "audio",
                )
            )
        for call in calls:
            if call.complete and not call.server:  # a server's is added as it ends
                self._history.add(Message("assistant", "", call.item_id, call=call))
        timings = self._timings.as_ms()
        cut = interrupted and heard is not None and bool(self._clauses)
        self._emit(
            msg.ReplyEnded(
                self.response_id,
                status,
                text,
                self._message,
                calls,
                approvals=tuple(self._approvals),
                timings_ms=timings,
                voice_to_voice_ms=self._timings.voice_to_voice_ms(),
                stamps=self._timings.stamps(),
                reason=reason,
                heard_ms=round(heard) if cut and heard is not None else None,
                error=error,
                modality=self.modality,
            )
        )
        log.info(
            "reply %s%s: %s | %r",
            status,
            f" ({reason})" if reason else "",
            " ".join(f"{k}={v:.0f}ms" for k, v in timings.items()),
            text[:80],
            extra={"session_id": self.session_id},
        )
