"""Interruptions that can be taken back (vad.interrupt_mode "pause").

When the user talks over a reply long enough to barge in, its audio is held
instead of dropped, and the interruption is judged within vad.resume_window_ms:

- the utterance ended and its words are none, or only a backchannel ("mm-hm",
  "yeah", "okay"): it was no turn. It is dropped, as echo is, and the reply goes on
  from where it was held: a client sees speech start and stop, and no item;
- the utterance ended with other words, or the agent does not listen for words (the
  echo agent): a turn. The reply is cancelled as a barge-in always was, history
  keeps what was heard before the pause, and the utterance is answered with the
  transcript already made;
- the user is still talking when the window closes: a turn. The reply is cancelled
  then, and the utterance is answered when it ends.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from app.config import VadSettings
from app.errors import EngineError
from app.observability.counters import InterruptionStats
from app.session.listening.backchannels import hum, may_be_backchannel, no_turn
from app.session.speaking.reply import Reply
from app.tasks import OneShot, cancel_task, spawn
from app.vocab.speech import Transcript

log = logging.getLogger(__name__)

# Speech beyond which an utterance is no backchannel ("yeah, okay" takes ~0.8 s).
BACKCHANNEL_MS = 1200
# More speech after which a held reply's interruption is heard again: about a brief
# transcription's time on a CPU, so an engine that is faster does not look every frame.
LOOK_AGAIN_MS = 100

Transcribe = Callable[[bytes], Awaitable[Transcript | None]]


@dataclass(frozen=True, slots=True)
class InterruptionCallbacks:
    transcribe: Transcribe
    transcribe_brief: Transcribe  # sooner, less surely: a second or so of speech
    still_speaking: Callable[[], bool]
    spoken_ms: Callable[[], int]  # how long the user has spoken in their utterance so far
    so_far: Callable[[], bytes]  # the user's utterance so far
    # The utterance was a turn: commit it under this item id, with its transcript if made.
    was_turn: Callable[[bytes, str, Transcript | None], None]
    was_no_turn: Callable[[str], None]  # its item id


class Interruptions:
    """One session's paused reply, if any, while its interruption is judged."""

    def __init__(
        self, session_id: str, callbacks: InterruptionCallbacks, stats: InterruptionStats
    ) -> None:
        self._session_id = session_id
        self._on = callbacks
        self._stats = stats
        self._reply: Reply | None = None
        self._window = OneShot(self._window_closed)
        self._judging: asyncio.Task[None] | None = None
        self._early: asyncio.Task[None] | None = None  # a judgment at a pause in the speech
        self._paused_at = 0.0
        # How long the user must have spoken for the held reply's interruption to be heard
        # again (see _look_again); None: not to be.
        self._look_again_at_ms: int | None = None
        self._window_s = 0.0
        # The utterance going on was judged a backchannel so far and the reply let go on,
        # when the user had spoken this long; None when none was.
        self.let_go_at_ms: int | None = None
        self._let_go: Reply | None = None  # that reply

    @property
    def pending(self) -> bool:
        """A reply is held while an utterance is judged."""
        return self._held is not None

    @property
    def judging(self) -> bool:
        """The utterance going on interrupted a reply: held, or let go on for now."""
        return self._held is not None or self._let_go is not None

    @property
    def _looking(self) -> bool:
        """A brief look at the utterance is under way."""
        return self._early is not None and not self._early.done()

    @property
    def _held(self) -> Reply | None:
        """The reply held, unless something else ended it meanwhile (the client)."""
        return self._reply if self._reply is not None and not self._reply.done else None

    def talked_over(self, reply: Reply, vad: VadSettings, spoken_ms: int) -> None:
        """The user spoke over `reply` long enough (`spoken_ms` so far): hold it while that
        is judged, or cut it now (interrupt_mode cancel, or a reply the transport cannot
        hold). After a backchannel let it go on, only as much speech again does."""
        if self.let_go_at_ms is not None:
            spoken_ms = self._on.spoken_ms()
            enough = max(BACKCHANNEL_MS, self.let_go_at_ms + vad.interrupt_min_speech_ms)
            if spoken_ms <= enough:
                self._look_again()
                return
            self.spoke_on()
        if self._held is not None:
            self._look_again()
            return  # held already, and being judged
        if not self._stop(reply, vad, spoken_ms):
            return
        if not self._looking:
            # Judged at once on what was said so far: a backchannel lets the reply go on
            # within a transcription's time, instead of after the utterance ends.
            self._early = spawn(self._judge_early(None), f"{self._session_id}:early")
        else:
            # A look at its first pause ("Yeah,") is under way: "Yeah, okay" is heard
            # whole once it is done, not at the next pause.
            self._look_again_at_ms = spoken_ms

    def _stop(self, reply: Reply, vad: VadSettings, spoken_ms: int, *, cut: bool = True) -> bool:
        """Hold `reply` for the interruption to be judged (True), or cut it now (unless
        not to be cut)."""
        self._window_s = vad.resume_window_ms / 1000
        held = vad.interrupt_mode == "pause" and self.pause(reply, self._window_s, spoken_ms)
        if not held and cut:
            self.cut(reply, spoken_ms)
        return held

    def pause(self, reply: Reply, window_s: float, spoken_ms: int) -> bool:
        """Hold `reply` while the interruption is judged; False where it cannot be held
        (the caller cancels it instead). True while one is already held.

        `spoken_ms`: how long the user had been speaking (the reaction time)."""
        if self._held is not None:
            return True
        if not reply.pause():
            return False
        self._reply = reply
        self._look_again_at_ms = None
        self._paused_at = time.monotonic()
        self._stats.paused += 1
        self._stats.reacted(spoken_ms)
        self._window.start(window_s)
        log.debug("reply paused by an interruption", extra={"session_id": self._session_id})
        return True

    def cut(self, reply: Reply, spoken_ms: int) -> None:
        """A barge-in that is not held: the reply is cancelled now."""
        if reply.interrupt("turn_detected"):
            self._stats.cancelled += 1
            self._stats.reacted(spoken_ms)

    def quiet(self, over: Reply | None, vad: VadSettings) -> None:
        """The user paused within an utterance: a short one is judged now, with a brief
        transcription of what was said so far, rather than after the whole silence
        window and a full one. A backchannel lets a held reply go on; words hold a reply
        that was let go on again, or `over`, a reply the utterance was too short to barge
        in on ("Stop."); the utterance's end judges it in full."""
        spoken_ms = self._on.spoken_ms()
        if spoken_ms > BACKCHANNEL_MS:
            return
        if self._looking:
            if self._held is not None:
                self._look_again_at_ms = spoken_ms  # the whole of it, once that look is done
            return
        if self._held is not None or self._let_go is not None:
            self._early = spawn(self._judge_early(spoken_ms), f"{self._session_id}:pause")
        elif over is not None and not over.done:
            judged = self._judge_short(over, vad, spoken_ms)
            self._early = spawn(judged, f"{self._session_id}:short")

    def started(self, over: Reply, vad: VadSettings) -> None:
        """The user began to speak over `over`: what they said is looked at once now, so
        a word too short to barge in ("Stop.") holds a reply that can be taken back a
        look's time after it began, not at its first pause. A backchannel that looks like
        words at its start ("Ri-") is heard again as it goes on (_look_again)."""
        if vad.interrupt_mode != "pause" or self.judging:
            return
        if not self._looking:
            self._early = spawn(self._judge_short(over, vad, None), f"{self._session_id}:start")

    async def _judge_short(self, reply: Reply, vad: VadSettings, at_pause_ms: int | None) -> None:
        """Words in an utterance too short to barge in stop the reply at its first pause
        (`at_pause_ms`), as a barge-in would, or at its start (None) hold it if it can be
        held; a sound or a backchannel leaves it playing."""
        heard = await self._brief(at_pause_ms)
        if heard is None or no_turn(heard.text, heard.language) or reply.done or self.judging:
            return
        spoken_ms = self._on.spoken_ms()
        if self._stop(reply, vad, spoken_ms, cut=at_pause_ms is not None):
            log.info("reply held %s, after %r", "at its start" if at_pause_ms is None else
                     "at a pause", heard.text, extra={"session_id": self._session_id})  # fmt: skip
            if may_be_backchannel(heard.text, heard.language):  # "I" of "I see"
                self._look_again_at_ms = spoken_ms + LOOK_AGAIN_MS

    async def _brief(self, at_pause_ms: int | None) -> Transcript | None:
        """A brief transcription of the utterance so far; None if it failed, or the user
        spoke on after the pause at `at_pause_ms`."""
        try:
            heard = await self._on.transcribe_brief(self._on.so_far())
        except EngineError as exc:
            log.info("no brief judgment of an interruption: %s", exc,
                     extra={"session_id": self._session_id})  # fmt: skip
            return None
        if at_pause_ms is not None and self._on.spoken_ms() != at_pause_ms:
            return None
        return heard

    async def _judge_early(self, at_pause_ms: int | None) -> None:
        """`at_pause_ms`: how long the user had spoken at the pause judged (None: still
        speaking, just interrupted)."""
        looked_at_ms = self._on.spoken_ms()
        started = time.monotonic()
        heard = await self._brief(at_pause_ms)
        if heard is None:
            return  # no words to judge by, or the user spoke on: the end decides
        took_ms = (time.monotonic() - started) * 1000
        if no_turn(heard.text, heard.language):
            if self._held is not None:
                self.let_go_at_ms = self._on.spoken_ms()
                self._let_go = self._held
                self._resume(f"after {heard.text!r} so far (transcribed in {took_ms:.0f} ms)")
            if self._let_go is not None:
                self._look_again_at_ms = looked_at_ms + LOOK_AGAIN_MS
        elif self._let_go is not None and self._held is None:
            reply = self._let_go
            self.spoke_on()  # more than a backchannel after all: held for the end to judge
            if not reply.done and self.pause(reply, self._window_s, self._on.spoken_ms()):
                log.info("reply held again after %r", heard.text,
                         extra={"session_id": self._session_id})  # fmt: skip
        elif self._held is not None:
            log.debug("reply still held after %r so far", heard.text,
                      extra={"session_id": self._session_id})  # fmt: skip
            if may_be_backchannel(heard.text, heard.language):
                self._look_again_at_ms = looked_at_ms + LOOK_AGAIN_MS

    def _look_again(self) -> None:
        """An interruption is heard again once LOOK_AGAIN_MS more has been said:
        - held on words, all but the last a backchannel: the last was perhaps only begun
          ("Ri-" of "Right", heard as "Why?"), and such a backchannel would otherwise hold
          the reply until its first pause (0.5-0.7 s of silence in bench/backchannels.py).
          Other words before it ("Hold on") settle it;
        - let go on as a backchannel: words after it ("Okay, but why?", or "Ah-" that was
          "Actually") hold the reply again then, not at the first pause."""
        if self._look_again_at_ms is None or self._looking:
            return
        spoken_ms = self._on.spoken_ms()
        if spoken_ms > BACKCHANNEL_MS:
            self._look_again_at_ms = None
        elif spoken_ms >= self._look_again_at_ms:
            self._look_again_at_ms = None
            self._early = spawn(self._judge_early(None), f"{self._session_id}:again")

    def spoke_on(self) -> None:
        """The user said more after a backchannel let the reply go on: enough to hold it
        again, and to judge the whole utterance when it ends."""
        self.let_go_at_ms = self._let_go = None

    def ended_over(self, reply: Reply, audio: bytes, item_id: str) -> None:
        """An utterance too short to barge in ("stop", "mm") ended while `reply` plays:
        judged by its words as a backchannel let go on is, the reply playing meanwhile."""
        self._let_go = reply
        self.ended(audio, item_id)

    def ended(self, audio: bytes, item_id: str) -> None:
        """The interrupting utterance ended: judge it by its words. Utterances are judged
        in order; the reply resumes only if the last of them was no turn."""
        if self._early is not None:
            self._early.cancel()  # the whole utterance is judged now
        previous = self._judging
        let_go, self._let_go, self.let_go_at_ms = self._let_go, None, None
        self._look_again_at_ms = None
        self._judging = spawn(
            self._judge(audio, item_id, previous, let_go), f"{self._session_id}:interruption"
        )

    async def _judge(
        self,
        audio: bytes,
        item_id: str,
        previous: asyncio.Task[None] | None,
        let_go: Reply | None,
    ) -> None:
        """`let_go`: the reply that went on, the utterance's start heard as a backchannel;
        its whole words may still make it a turn."""
        started = time.monotonic()
        try:
            heard = await self._on.transcribe(audio)
        except EngineError as exc:
            log.warning("could not judge an interruption: %s", exc,
                        extra={"session_id": self._session_id})  # fmt: skip
            heard = None  # answered as a turn, which transcribes it again
        if let_go is not None and heard is not None and not no_turn(heard.text, heard.language):
            heard = await self._heard_as_its_start(audio, heard)
        if previous is not None:
            await asyncio.wait([previous])
        # None: no words to judge by (the echo agent, or STT failed): a turn.
        judged = self._held is not None or let_go is not None
        if judged and heard is not None and no_turn(heard.text, heard.language):
            self._on.was_no_turn(item_id)
            if self._held is not None and self._judging is asyncio.current_task():
                took_ms = (time.monotonic() - started) * 1000
                self._resume(f"after {heard.text!r} (transcribed in {took_ms:.0f} ms)")
            return
        if let_go is not None and let_go.interrupt("turn_detected"):
            self._stats.cancelled += 1
        self._cancel()
        self._on.was_turn(audio, item_id, heard)

    async def _heard_as_its_start(self, audio: bytes, heard: Transcript) -> Transcript:
        """An utterance whose start was heard as a backchannel, heard whole as words: heard
        again as its start was, primed with backchannels, and a hum if that says so.
        Unprimed, Whisper spells some hums as words (espeak-ng's "Mm-hmm" in en-gb as "And
        then them."). Primed, it may also hear the primer's words in an unclear start: over
        its own echo, "Wait, stop." was "Right, okay." primed and "Wait." unprimed
        (bench/echo.py), so primed words never outweigh the unprimed ones."""
        try:
            again = await self._on.transcribe_brief(audio)
        except EngineError:
            return heard
        if again is None or not hum(again.text):
            return heard
        log.info("heard whole as %r, and as %r primed", heard.text, again.text,
                 extra={"session_id": self._session_id})  # fmt: skip
        return again

    def _window_closed(self) -> None:
        if self._judging is not None and not self._judging.done():
            return  # the words decide
        if self._on.still_speaking():
            self._cancel()
            return
        self._resume("as the utterance was dropped")  # the client cleared its input

    def _resume(self, why: str) -> None:
        reply, self._reply = self._reply, None
        self._window.cancel()
        if reply is not None and not reply.done:
            reply.resume()
            self._stats.resumed += 1
            held_ms = (time.monotonic() - self._paused_at) * 1000
            log.info("reply resumed %s, held %.0f ms", why, held_ms,
                     extra={"session_id": self._session_id})  # fmt: skip

    def _cancel(self) -> None:
        reply, self._reply = self._reply, None
        self._window.cancel()
        if reply is not None and reply.interrupt("turn_detected"):
            self._stats.cancelled += 1

    async def close(self) -> None:
        self._window.cancel()
        self._reply = self._let_go = None
        await cancel_task(self._early)
        await cancel_task(self._judging)
