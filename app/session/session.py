"""One conversation: verbs in, typed messages out. Per-session state only; the
responder and the engines behind it are shared by every session. A dialect at the edge
(the OpenAI Realtime events, a carrier's media stream) turns its client's requests into
these verbs and the messages into its wire events."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from app.agent.responders import Responder
from app.audio.echo import EchoReference
from app.audio.front_end import FrontEnd
from app.audio.vad import UtteranceEnded, UtteranceStarted
from app.config import LimitsSettings, Settings, VadSettings
from app.ids import new_id
from app.observability.counters import InterruptionStats, SpeculationStats
from app.session import messages as msg
from app.session.history import History, Message
from app.session.items import Items
from app.session.job_queue import JobQueue
from app.session.jobs import Announcement, ApprovedCall, Job, ReplyRequest, UserTurn
from app.session.listening.idle import IdleTimeout
from app.session.listening.interruption import InterruptionCallbacks, Interruptions
from app.session.listening.keypad import KEYS, Keypad, entry_text
from app.session.listening.manual import ManualInput
from app.session.listening.speculation import Speculation
from app.session.listening.turn_taking import TurnCallbacks, TurnTaking
from app.session.listening.words_so_far import WordsSoFar
from app.session.options import (
    OptionChanges,
    SessionOptions,
    TurnDetectionChange,
    changed_options,
)
from app.session.recording import Recording
from app.session.refusals import (
    CannotAnswerText,
    NoActiveResponse,
    NothingPlaying,
    NothingToCommit,
    OptionError,
    ResponseInProgress,
    UnknownItem,
)
from app.session.server_tools import ServerTools
from app.session.speaking.answer import Answerer
from app.session.speaking.audio_out import AudioOut
from app.session.speaking.backend import Backend
from app.session.speaking.reply import Emit, Reply
from app.session.taps import TappedOut, Taps
from app.session.usage import Usage
from app.tasks import CloseOnce
from app.tools.servers import ToolServers
from app.vocab.languages import AUTO
from app.vocab.speech import BriefLook, Transcript, TurnModel, VoiceModel

log = logging.getLogger(__name__)

# The conversation kept in memory, in prompts' worth (llm.max_history_messages):
# older items than a prompt holds stay retrievable and deletable for a while.
HISTORY_PROMPTS = 4

OutputLevel = Callable[[], float]


class Session:
    def __init__(
        self,
        session_id: str,
        settings: Settings,
        responder: Responder,
        audio: AudioOut,
        emit: Emit,
        *,
        output_level: OutputLevel | None = None,
        reference: EchoReference | None = None,
        turn_model: TurnModel | None = None,
        voice_model: VoiceModel | None = None,
        speculation: SpeculationStats | None = None,
        interruptions: InterruptionStats | None = None,
        tools: ToolServers | None = None,
    ) -> None:
        """`output_level`: how loud the agent's voice went out lately (dBFS), for the echo
        guard; `reference`: what the server played, to cancel its echo (both where the
        transport can tell). `turn_model`, `voice_model`: semantic_vad's, Silero's (shared).
        `speculation`, `interruptions`: the counters of speculative replies and of replies
        paused, resumed and cancelled (the process's, usually). `tools`: the MCP servers
        every session shares, and which a client may name (the process's)."""
        self.id = session_id
        self._settings = settings
        self._responder = responder
        self._emit = emit
        self._turn_model = turn_model
        self.speculation = speculation or SpeculationStats()
        self._speculation = Speculation(session_id, self.speculation)
        self.options = SessionOptions.from_settings(settings)
        if self.options.semantic and turn_model is None:
            log.warning("no turn model loaded: turns end by silence", extra={"session_id": self.id})
            self.options = self.options.changed(
                OptionChanges(turn_detection=TurnDetectionChange(semantic=False)),
                voices=(),
                base_vad=settings.vad,
            )
        limit = settings.llm.max_history_messages
        self.history = History(limit * HISTORY_PROMPTS)
        self.taps = Taps()  # who else hears the call's audio (a recording, a sideband)
        self.usage = Usage()
        self.backend = Backend(session_id, responder, self.usage)
        self.items = Items(self.history, emit, lambda: self.reply, settings.limits)
        self.tools = ServerTools(
            session_id,
            tools or ToolServers(settings.tools),
            emit,
            lambda: self.history.last_item_id,
        )
        callbacks = TurnCallbacks(
            started=self._speech_started,
            paused=self._speculate,
            resumed=self._speculation.abandon,
            ended=self._speech_ended,
            interrupted=self._talked_over,
            quiet=self._quiet,
        )
        self._front = FrontEnd(session_id, reference, cancel_echo=settings.audio.echo_cancellation)
        self._front.suppress(self.options.noise_reduction)
        if output_level is not None:
            output_level = self._front.output_level(output_level)
        self._turns = TurnTaking(
            session_id, settings, callbacks, turn_model, voice_model, output_level=output_level
        )
        self._turns.configure(self.options)
        self._answerer = Answerer(
            session_id,
            responder,
            history=self.history,
            prompt_limit=limit,
            audio=TappedOut(audio, self.taps),
            emit=emit,
            usage=self.usage,
            fallback=settings.tts.fallback_speech,
            server_voice=settings.tts.voice,
            tools=self.tools,
        )
        self._jobs = JobQueue(session_id, self._answer, self._answered)
        self._item_id = new_id("item")  # the user's next utterance
        self._speech_ends: dict[str, float] = {}  # utterance's item id -> its speech's end
        self._manual = ManualInput(settings.vad.max_utterance_s)  # turn detection off
        self._idle = IdleTimeout(
            lambda: self._turns.position_ms,
            lambda: not (self.busy or self._turns.speaking),
            self._idle_timed_out,
        )
        self._keypad = Keypad(settings.turn.keypad_pause_ms, self._keys_entered)
        self._interruptions = Interruptions(
            session_id,
            InterruptionCallbacks(
                transcribe=self._transcribe,
                transcribe_brief=self._transcribe_brief,
                still_speaking=lambda: self._turns.speaking,
                spoken_ms=lambda: self._turns.spoken_ms,
                so_far=self._turns.so_far,
                was_turn=self._committed,
                was_no_turn=self._dropped,
            ),
            interruptions or InterruptionStats(),
        )
        self._so_far = WordsSoFar(
            session_id,
            lambda audio: self._transcribe_brief(audio, "words"),
            self._read_so_far,
            self._may_read_so_far,
        )
        self._closer = CloseOnce(self._close, f"{session_id}:close")
        self.stuck: list[str] = []  # tasks that outlived close(): the slot is quarantined
        self.last_active_at = time.monotonic()
        self.muted = False  # the client muted its input: the agent hears silence
        self.recording: Recording | None = None  # given by record()
        self._started = False

    # --- lifecycle

    def start(self) -> None:
        self._jobs.start()
        self._started = True
        self.tools.use(self.options.servers)

    async def close(self) -> list[str]:
        """Stop the session's work; return the names of tasks that would not stop. Safe
        to call twice; concurrent callers share one close."""
        await self._closer()
        return self.stuck

    # --- what a dialect reads

    @property
    def reply(self) -> Reply | None:
        """The reply the user may be hearing now."""
        return self._jobs.reply

    @property
    def busy(self) -> bool:
        """A reply is being prepared or played, or one is waiting (JobQueue.busy)."""
        return self._jobs.busy

    @property
    def limits(self) -> LimitsSettings:
        """What a client may ask of this session (the server's limits)."""
        return self._settings.limits

    # --- verbs

    def touch(self) -> None:
        """The client did something: a text-only client talks only in events."""
        self.last_active_at = time.monotonic()

    def configure(self, changes: OptionChanges) -> None:
        """Change this session's options, all or none (OptionError)."""
        before = self.options
        options = self._changed(changes)
        # Before any connection is made: a client may name only the URLs allowed.
        if (refused := self.tools.refused(options.servers)) is not None:
            raise OptionError(refused, "tools")
        self.options = options
        if self._started and options.servers != before.servers:
            self.tools.use(options.servers)
        if not self.options.idle_timeout_ms:
            self._idle.cancel()
        self._front.suppress(self.options.noise_reduction)
        if self.options.vad is not before.vad or self.options.eagerness != before.eagerness:
            self._speculation.abandon()
            self._manual.clear()
            self._turns.configure(self.options)

    def _changed(self, changes: OptionChanges) -> SessionOptions:
        """The session's options with `changes` (OptionError, naming the option)."""
        return changed_options(
            self.options, changes, self._settings, self._responder, self._turn_model
        )

    def record(self, recording: Recording) -> None:
        """Record the call from now on, both sides."""
        if self.recording is None:
            self.recording = recording
            self.taps.add(recording)

    def push_audio(self, pcm16k: bytes) -> None:
        """The user's microphone: 16 kHz mono s16. Runs in the reader task: stays cheap."""
        self.usage.audio_in_samples += len(pcm16k) // 2
        if self.taps:
            self.taps.heard(pcm16k)
        if self.muted:  # heard as silence: the turn detector's clock goes on
            pcm16k = bytes(len(pcm16k))
        heard, judged = self._front.process(pcm16k)
        if self.options.vad is None:
            self._manual.push(heard)
            return
        self._turns.push(heard, judged, interruptible=self._jobs.spoken_over is not None)
        if self._turns.speaking and not self.busy:
            turns = self._turns
            self._so_far.heard(self._item_id, turns.spoken_ms, turns.voiced, turns.so_far)

    def press(self, key: str) -> None:
        """A keypad press (DTMF) from a phone; ValueError for what is not a key."""
        if key not in KEYS:
            raise ValueError(f"not a keypad key: {key[:8]!r}")
        self.touch()
        self._emit(msg.KeyPressed(key, time.time()))
        self._keypad.press(key)

    def commit_input(self) -> None:
        """End the user's turn now (NothingToCommit if there is no speech)."""
        if self.options.vad is None:
            audio = self._manual.take()
            if audio is None:
                raise NothingToCommit("the input audio buffer holds no speech to commit")
            self._committed(audio)
            return
        if not self._turns.end_now():
            raise NothingToCommit("the input audio buffer holds no speech to commit")

    def clear_input(self) -> None:
        """Forget the user's audio not yet committed."""
        self._manual.clear()
        self._turns.reset()
        self._speculation.abandon()

    def create_response(
        self, instructions: str | None = None, changes: OptionChanges | None = None
    ) -> None:
        """Answer from the conversation as it stands; `instructions` for this reply only,
        and `changes` (its tools and tool_choice) too. OptionError names a change as
        `response.<option>`."""
        if not self._responder.answers_text:
            raise CannotAnswerText(
                "the echo agent only plays back what it hears; it cannot answer text"
            )
        if self.busy:
            raise ResponseInProgress("a response is already in progress")
        own = None
        if changes is not None:
            try:
                own = self._changed(changes)
            except OptionError as exc:
                raise OptionError(str(exc), f"response.{exc.option}") from None
            # Before any connection is made, as for the session's.
            if (refused := self.tools.refused(own.servers)) is not None:
                raise OptionError(refused, "response.tools")
        self._enqueue(ReplyRequest(self.id, instructions, options=own, changes=changes))

    def announce(self, text: str = "", audio24k: bytes | None = None) -> str:
        """Say `text` as it is, or play `audio24k` (24 kHz mono s16), after any reply in
        progress; the user may interrupt it like any reply. Returns its response id."""
        job = Announcement(self.id, text=text, audio24k=audio24k)
        self._enqueue(job)
        return job.response_id

    def cancel_response(self, response_id: str | None = None) -> None:
        reply = self.reply
        if reply is None or (response_id and response_id != reply.response_id):
            raise NoActiveResponse("no response in progress to cancel")
        reply.interrupt("client_cancelled")

    def approve(
        self,
        request_id: str,
        *,
        approve: bool,
        reason: str | None = None,
        item_id: str | None = None,
    ) -> None:
        """The client's answer to an approval request: an approved call is run, and the
        agent answers with its result."""
        pending = self.tools.answered(request_id)
        if pending is None:
            raise UnknownItem(f"no mcp_approval_request {request_id!r} is waiting for an answer")
        # The asking response's tools, on the session's options as they are now.
        own = None if pending.changes is None else self._changed(pending.changes)
        previous = self.history.last_item_id
        self._emit(msg.ApprovalAnswered(item_id or new_id("item"), request_id, approve, reason,
                                        previous))  # fmt: skip
        if approve:
            self._enqueue(ApprovedCall(self.id, request_id, *pending.call, own, pending.changes))

    def clear_output(self) -> None:
        """Stop the reply's audio (and so the reply)."""
        reply = self.reply
        if reply is None or not reply.interrupt("client_cancelled"):
            raise NothingPlaying("no audio is playing")

    # --- the user's side

    @property
    def _vad(self) -> VadSettings:
        """Turn settings: the session's, or the server's while the client commits turns."""
        return self.options.vad or self._settings.vad

    def _speech_started(self, event: UtteranceStarted) -> None:
        self.touch()
        self._idle.cancel()
        self._emit(msg.SpeechStarted(self._item_id, event.audio_start_ms))
        if self._vad.interrupt_response and (reply := self._jobs.spoken_over) is not None:
            self._interruptions.started(reply, self._vad)

    def _speech_ended(self, event: UtteranceEnded) -> None:
        item_id, self._item_id = self._item_id, new_id("item")
        if self._turns.echo_only:  # its start was never told either
            self._dropped(item_id, "as echo")
            return
        self._emit(msg.SpeechStopped(item_id, event.audio_end_ms, event.silence_ms))
        # When the user stopped speaking: a turn's timings count from there, however long
        # judging it takes. One entry per utterance being judged; taken when it is.
        self._speech_ends[item_id] = time.perf_counter() - event.silence_ms / 1000
        if self._interruptions.judging:
            self._interruptions.ended(event.audio, item_id)
        elif (reply := self._jobs.spoken_over) is not None and self._vad.interrupt_response:
            self._interruptions.ended_over(reply, event.audio, item_id)
        else:
            self._committed(event.audio, item_id)

    async def _transcribe(self, audio: bytes) -> Transcript | None:
        return await self._responder.transcribe(
            audio, logprobs=self.options.logprobs, language=self.options.language
        )

    async def _transcribe_brief(
        self, audio: bytes, look: BriefLook = "backchannel"
    ) -> Transcript | None:
        # Detecting the language of a second of speech is a guess: the last one heard.
        language = self.options.language
        if language == AUTO and self._answerer.language:
            language = self._answerer.language
        return await self._responder.transcribe(audio, brief=look, language=language)

    def _dropped(self, item_id: str, why: str = "as no turn") -> None:
        # A reply begun in its pause (after a backchannel, an echo) would be kept by the
        # next turn.
        self._speculation.abandon(item_id)
        self._speech_ends.pop(item_id, None)
        log.info("dropped utterance %s %s", item_id, why, extra={"session_id": self.id})

    def _committed(
        self,
        audio: bytes,
        item_id: str | None = None,
        heard: Transcript | None = None,
    ) -> None:
        """The user's turn is over: a user item exists; transcribe it (unless `heard` is
        its transcript), maybe answer it."""
        if item_id is None:
            item_id, self._item_id = self._item_id, new_id("item")
        spoke_until = self._speech_ends.pop(item_id, None)
        self._emit(msg.InputCommitted(item_id, self.history.last_item_id))
        self.usage.turns += 1
        if not self._speculation.keep(spoke_until):
            respond = self.options.create_response
            turn = UserTurn(self.id, audio, item_id, ended=True, respond=respond, heard=heard)
            if spoke_until is not None:
                turn.timings.spoke_until(spoke_until)
            self._enqueue(turn)

    def _keys_entered(self, keys: str) -> None:
        """An entry on the keypad is the user's turn: it cuts the agent short, as keys do
        on any phone menu, and is answered like speech."""
        self.items.add("user", entry_text(keys))
        if not (self.options.create_response and self._responder.answers_text):
            return
        if self.reply is not None:
            self.reply.interrupt("turn_detected")
        self._enqueue(ReplyRequest(self.id, None))

    def _talked_over(self, spoken_ms: int) -> None:
        if (reply := self._jobs.spoken_over) is not None:
            self._interruptions.talked_over(reply, self._vad, spoken_ms)

    def _quiet(self) -> None:
        """A pause within the user's utterance: maybe time to judge it."""
        reply = self._jobs.spoken_over
        if not self._vad.interrupt_response or self._turns.echo_only:
            reply = None  # the end of the utterance drops it, or keeps it for later
        self._interruptions.quiet(reply, self._vad)

    def _may_read_so_far(self) -> bool:
        options = self.options
        reply = options.create_response and not (options.tools or options.servers)
        return reply and self._responder.reads_while_listening()

    def _read_so_far(self, words: str) -> None:
        if self._turns.speaking and not self.busy:  # the turn goes on, unanswered yet
            self._answerer.read_so_far(self.options, words)

    def _speculate(self, audio: bytes) -> None:
        """Start the reply during the silence window, if the agent has nothing else to do.

        Only when idle: a reply still running would be missing from the history
        the speculative prompt is built on.
        """
        if self.busy:
            return
        # Whether to answer is known now: changing turn detection drops the speculation.
        respond = self.options.create_response
        turn = UserTurn(self.id, audio, self._item_id, ended=False, respond=respond)
        self._jobs.put(turn)
        self._speculation.begin(turn)

    # --- the agent's side

    def _arm_idle(self) -> None:
        """A reply has played: if nobody speaks for idle_timeout_ms, the agent speaks up."""
        self._idle.cancel()
        answers = self._responder.answers_text
        if answers and self.options.idle_timeout_ms and self.options.vad is not None:
            self._idle.start(self.options.idle_timeout_ms)

    def _idle_timed_out(self, from_ms: int, end_ms: int) -> None:
        # The silence becomes an (empty) user item, and the agent is asked to go on.
        item_id, self._item_id = self._item_id, new_id("item")
        self._emit(msg.InputTimedOut(item_id, from_ms, end_ms))
        self._emit(msg.InputCommitted(item_id, self.history.last_item_id))
        self._emit(msg.UserTranscribed(item_id, "", (end_ms - from_ms) / 1000))
        self.history.add(Message("user", "", item_id, spoken=True))
        self._enqueue(ReplyRequest(self.id, nudge=True))

    def _enqueue(self, job: Job) -> None:
        self._idle.cancel()
        if not self._jobs.put(job):
            log.warning("turn queue full; dropped one", extra={"session_id": self.id})
            self._emit(msg.Problem("turn_dropped", "agent busy: an earlier utterance was dropped"))

    async def _answer(self, job: Job) -> None:
        await self._answerer.answer(job, self.options)

    def _answered(self, job: Job) -> None:
        assert job.task is not None
        self._answerer.report(job.task)
        if job.reply is not None and job.reply.opened and not self._jobs.waiting:
            self._arm_idle()

    async def _close(self) -> None:
        self._idle.cancel()
        self._keypad.close()
        await self._turns.close()
        await self._interruptions.close()
        await self._so_far.close()
        tasks = self._jobs.tasks()
        for task in tasks:
            task.cancel()
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=self._settings.pool.drain_timeout_s)
            self.stuck = sorted(task.get_name() for task in pending)
        self._answerer.close()
        # After the replies: a call cut short then is not made again on a closing link.
        await self.tools.aclose()
