"""Answering one job: transcribe the turn, then speak the responder's reply.

Everything the client would see waits for the user's turn to have really
ended (`UserTurn.when_ended`), so a speculative answer stays invisible and
silent until then, and vanishes with its task if the user goes on talking.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import replace

import numpy as np

from app.agent.responders import Responder, SpeechRequest
from app.audio.resample import Resampler
from app.errors import EndOfStream, EngineError
from app.session import messages as msg
from app.session.history import ConversationTooLong, History, Message, finished
from app.session.jobs import Announcement, ApprovedCall, Job, ReplyRequest, UserTurn
from app.session.options import SessionOptions
from app.session.server_tools import ServerTools
from app.session.speaking.audio_out import AudioOut
from app.session.speaking.read_ahead import ReadAhead
from app.session.speaking.reply import Emit, Reply
from app.session.speaking.server_calls import ServerCalls
from app.session.usage import Usage
from app.vocab.chat import ChatMessage, ToolCallDelta, ToolChoice
from app.vocab.languages import ENGLISH, reply_note, spoken
from app.vocab.pcm import BYTES_PER_S
from app.vocab.speech import Transcript

log = logging.getLogger(__name__)

ANNOUNCED_RATE = 24_000  # a client's audio to play: 24 kHz PCM, as Live's fixtures are
# What the agent is told when the user has been quiet for the idle timeout.
NUDGE = "The user has said nothing for a while. Invite them, briefly, to go on."


class Answerer:
    def __init__(
        self,
        session_id: str,
        responder: Responder,
        *,
        history: History,
        prompt_limit: int,
        audio: AudioOut,
        emit: Emit,
        usage: Usage,
        fallback: str = "",
        server_voice: str = "",
        tools: ServerTools | None = None,
    ) -> None:
        """`prompt_limit`: the most conversation messages a prompt holds; `usage`: the
        session's, which its replies add to; `fallback`: said when a reply fails before
        any of it was heard (in English; another language says its own); `server_voice`:
        the voice a session has unless it chose one, which gives way to the language's.
        `tools`: the session's MCP servers, whose tools a reply may call."""
        self._session_id = session_id
        self._responder = responder
        self._fallback = fallback
        self._server_voice = server_voice
        self.language = ""  # what the user spoke last (a Whisper code); empty: not known
        self._spoke_other = False  # the user has spoken something other than English
        self._history = history
        self._prompt_limit = prompt_limit
        self._audio = audio
        self._emit = emit
        self._usage = usage
        self._tools = tools
        self._calls = ServerCalls(session_id, tools, self._say)
        self._ahead = ReadAhead(session_id, responder, history, prompt_limit)

    async def answer(self, job: Job, options: SessionOptions) -> None:
        """Runs as `job.task`."""
        if isinstance(job, UserTurn):
            await self._answer_turn(job, options)
        elif isinstance(job, Announcement):
            await self._announce(job, options)
        elif not isinstance(job, (ReplyRequest, ApprovedCall)):
            raise TypeError(f"no answer for a {type(job).__name__}")
        elif job.options is None:
            await self._requested(job, options, self._calls)
        else:
            own, tools = job.options, self._tools
            if tools is not None and own.servers != options.servers:
                # Servers the response named, not the session: listed for it, let go after.
                tools = tools.for_reply(own.servers)
            try:
                calls = ServerCalls(self._session_id, tools, self._say, job.changes)
                await self._requested(job, own, calls)
            finally:
                if tools is not None and tools is not self._tools:
                    tools.let_go()

    async def _requested(
        self, job: ReplyRequest | ApprovedCall, options: SessionOptions, calls: ServerCalls
    ) -> None:
        """A reply the client asked for, or the one after a call it approved; `options`:
        the reply's own, where its response has them."""
        if isinstance(job, ReplyRequest):
            await self._reply(job, options, calls)
            return
        self._new_reply(job, "text" if options.text_only else "audio")
        await self._respond(job, options, None, lambda: self._prompt(options, []), calls, job)

    def report(self, task: asyncio.Task[None]) -> None:
        """A job's task is over: tell the client if it failed outside a reply."""
        if task.cancelled():
            return
        exc = task.exception()
        if isinstance(exc, EndOfStream):
            log.info("peer stopped listening mid-reply", extra={"session_id": self._session_id})
        elif isinstance(exc, EngineError):
            log.error("turn failed: %s", exc, extra={"session_id": self._session_id})
            self._emit(msg.Problem(exc.code, str(exc)))
        elif exc is not None:
            log.error("turn crashed", exc_info=exc, extra={"session_id": self._session_id})
            self._emit(msg.Problem("internal", "internal error"))

    async def _answer_turn(self, turn: UserTurn, options: SessionOptions) -> None:
        # The reply exists while the turn is transcribed, so the user speaking again can
        # hold it or take it over (Reply.interrupt) before it is opened.
        reply = self._new_reply(turn, "text" if options.text_only else "audio")
        try:
            heard = turn.heard or await self._responder.transcribe(
                turn.audio, logprobs=options.logprobs, language=options.language
            )
        except EngineError as exc:
            # The user spoke and is owed an answer: a failed reply, told and (with the
            # fallback) spoken, as when the LLM fails. Their item is kept, without words.
            failed = exc
            turn.when_ended(lambda: self._unheard(turn, failed))

            def unheard() -> list[ChatMessage]:
                raise failed

            await self._respond(turn, options, turn, unheard, self._calls)
            return
        said: list[ChatMessage] = []
        if heard is not None:
            turn.timings.mark("stt_done")
            self._heard_in(heard.language)
            turn.when_ended(lambda: self._heard(turn, heard))
            if reply.done or not turn.respond or not (heard.text or self._owed()):
                await turn.wait_ended()
                if reply.done:
                    log.info("the user spoke on: their next turn answers this one too",
                             extra={"session_id": self._session_id})  # fmt: skip
                elif not heard.text:
                    log.info("empty transcript; no reply", extra={"session_id": self._session_id})
                return
            if heard.text:
                said = [{"role": "user", "content": heard.text}]
        await self._respond(
            turn, options, turn, lambda: self._prompt(options, said, turn=turn), self._calls
        )

    def _owed(self) -> bool:
        """The user's last words were never answered: their reply was taken over by more
        speech (a cough, a sound) before any of it was heard. That speech has no words,
        and the words before it are answered now."""
        for message in reversed(self._history.messages()):
            if message.content or message.call is not None:
                return message.role == "user" and message.spoken
        return False

    async def _reply(
        self, request: ReplyRequest, options: SessionOptions, calls: ServerCalls
    ) -> None:
        instructions = request.instructions or options.instructions
        nudge: list[ChatMessage] = [{"role": "system", "content": NUDGE}] if request.nudge else []
        self._new_reply(request, "text" if options.text_only else "audio")
        await self._respond(
            request, options, None, lambda: self._prompt(options, nudge, instructions), calls
        )

    def _prompt(
        self,
        options: SessionOptions,
        then: list[ChatMessage],
        instructions: str | None = None,
        *,
        turn: UserTurn | None = None,
    ) -> list[ChatMessage]:
        """The conversation for the LLM, with `then` after it (raises ConversationTooLong).

        `then` says what the user said in `turn`: a turn that has ended is in the
        history already, and is not said twice. Words whose answer was taken over before
        it was heard stay a message of their own, the words after them the next: the LLM
        answers the last as corrected ("...France?", "Sorry, I mean Italy."), where
        Qwen2.5-Coder-0.5B given them as one message answered the first (Paris). Words
        that stopped short ("What is the capital of") are finished by the next, in one
        message (app/session/history.py: continued)."""
        if turn is not None and self._history.find(turn.item_id) is not None:
            then = []
        # Speculative: the window as it will be once the turn is in.
        coming = turn is not None
        return [*self._conversation(options, then, instructions, coming), *self._language_note()]

    def _conversation(
        self,
        options: SessionOptions,
        then: list[ChatMessage],
        instructions: str | None,
        coming: bool,
    ) -> list[ChatMessage]:
        """The history's prompt, then `then`; `coming`: `then` is not in the history yet."""
        start = self._history.prompt(
            instructions or options.instructions,
            limit=self._prompt_limit,
            truncation=options.truncation,
            coming=len(then) if coming else 0,
        )
        if coming and then and self._history.stopped_short():
            start[-1]["content"] = finished(start[-1]["content"], then[0]["content"])
            then = then[1:]
        return [*start, *then]

    def read_so_far(self, options: SessionOptions, words: str) -> None:
        """The user's words so far, their turn going on: the LLM may read them now, and
        at the turn only the words after them."""
        try:
            prompt = self._conversation(options, [{"role": "user", "content": words}], None, True)
        except ConversationTooLong:
            return
        self._ahead.so_far(options, prompt)

    def _heard_in(self, language: str) -> None:
        if language:
            self.language = language
            self._spoke_other |= language != ENGLISH

    def _language_note(self) -> list[ChatMessage]:
        """Which language to answer in, after the conversation, so the prompt's start stays
        the same (an LLM server's prefix cache). Only once the user spoke another language
        than English: SmolLM2-135M told to answer in English answered in French."""
        if not self._spoke_other:
            return []
        return [{"role": "system", "content": reply_note(self.language)}]

    def _voice(self, options: SessionOptions) -> str:
        """The session's voice; the language's own, if it has one (and the voices file
        too), where the session has the server's."""
        own = spoken(self.language).voice if self.language else ""
        voices = self._responder.voices
        if own and options.voice == self._server_voice and (not voices or own in voices):
            return own
        return options.voice

    def _unheard(self, turn: UserTurn, failure: EngineError) -> None:
        self._emit(msg.TranscriptionFailed(turn.item_id, failure.code, str(failure)))
        self._history.add(Message("user", "", turn.item_id, spoken=True, audio=turn.audio))

    def _heard(self, turn: UserTurn, heard: Transcript) -> None:
        seconds = len(turn.audio) / BYTES_PER_S
        self._emit(
            msg.UserTranscribed(turn.item_id, heard.text, seconds, heard.words, heard.language)
        )
        # Kept even when nothing could be made out: the item exists, with its audio.
        self._history.add(Message("user", heard.text, turn.item_id, spoken=True, audio=turn.audio))

    async def _respond(
        self,
        job: Job,
        options: SessionOptions,
        turn: UserTurn | None,
        prompt: Callable[[], list[ChatMessage]],
        calls: ServerCalls,
        approved: ApprovedCall | None = None,
    ) -> None:
        """Speak (or write) `job`'s reply; `turn`, if any, must end before it shows.
        `calls`: the reply's MCP servers; `approved`: a call the client approved, run
        first."""
        reply = job.reply
        assert reply is not None, "made by the job's answer"
        when_ended: Callable[[Callable[[], None]], None] = (
            turn.when_ended if turn is not None else lambda action: action()
        )
        # Watched from the start, so the reply is announced as soon as the turn ends.
        when_ended(reply.open)
        failure: str | None = None
        try:
            request = SpeechRequest(
                self._session_id,
                prompt(),
                job.audio if isinstance(job, UserTurn) else b"",
                self._voice(options),
                options.speed,
                job.timings,
                options.max_output_tokens,
                await calls.offered(options),
                self._tool_choice(options),
                reply.response_id,
                self._usage.tokens,
                self.language,
            )
            resampler = Resampler(reply.rate)  # stateful across the reply's pieces
            ran = 0  # rounds of the servers' calls this reply has run
            if approved is not None:
                ran = 1 if await calls.run_approved(reply, request, approved) else -1
                request = replace(request, prompt=prompt())
            while ran >= 0:
                if ran >= calls.max_rounds > 0:  # enough calls: it answers in words
                    request = replace(request, tool_choice="none")
                if reply.modality == "text":
                    await self._write(reply, request, turn, calls)
                else:
                    await self._speak(reply, request, turn, resampler, calls)
                if ran >= calls.max_rounds or not await calls.run(reply, request):
                    break
                ran += 1
                reply.next_round()
                request = replace(request, prompt=prompt())
            await calls.settle_filler(reply)  # a reply that ended in a call: not said
            if ran > 0 and request.tool_choice == "none" and not reply.text:
                # Its last round, told to answer in words, wrote none: not left silent.
                await self._say_fallback(reply, options)
            if reply.modality == "audio":
                await _ended(turn)
                await reply.play(resampler.flush())
        except EngineError as exc:
            await _ended(turn)
            log.error("reply failed: %s", exc, extra={"session_id": self._session_id})
            self._emit(msg.Problem(exc.code, str(exc)))
            failure = str(exc)
            # A prompt over its limit is the client's to fix (truncation), not a fault.
            if not isinstance(exc, ConversationTooLong):
                await self._say_fallback(reply, options)
        except asyncio.CancelledError:
            reply.interrupt("client_cancelled")  # a no-op if that is what cancelled us
            raise
        except Exception as exc:  # a bug or an engine failing oddly: still end the reply
            log.exception("reply crashed", extra={"session_id": self._session_id})
            await _ended(turn)
            self._emit(msg.Problem("internal", "internal error"))
            failure = f"internal error: {type(exc).__name__}"
        finally:
            calls.drop_filler(reply)
        own = isinstance(job, (ReplyRequest, ApprovedCall)) and job.options is not None
        if failure is None and reply.text and not own:  # the next turn has the session's
            self._ahead.after(options, reply.text)
        await reply.finish_playing(failure)

    def close(self) -> None:
        """After the session's jobs: nothing more is read ahead."""
        self._ahead.close()

    def _new_reply(self, job: Job, modality: msg.Modality, response_id: str | None = None) -> Reply:
        assert job.task is not None, "a job is answered in its own task"
        job.reply = Reply(
            self._session_id,
            task=job.task,
            audio=self._audio,
            history=self._history,
            emit=self._emit,
            timings=job.timings,
            modality=modality,
            usage=self._usage,
            response_id=response_id,
        )
        return job.reply

    async def _announce(self, job: Announcement, options: SessionOptions) -> None:
        """Say the job's text as it is, or play its audio: a reply with no LLM."""
        reply = self._new_reply(job, "audio", job.response_id)
        reply.open()
        failure: str | None = None
        resampler = Resampler(reply.rate)
        try:
            if job.audio24k is not None:
                samples = np.frombuffer(job.audio24k, dtype=np.int16)
                await reply.play(resampler.pcm(samples, ANNOUNCED_RATE))
            else:
                speech = await self._responder.say(
                    job.text, self._voice(options), options.speed, self.language
                )
                if speech is not None:
                    await reply.play(resampler.pcm(speech.samples, speech.rate), job.text)
            await reply.play(resampler.flush())
        except asyncio.CancelledError:
            reply.interrupt("client_cancelled")  # a no-op if that is what cancelled us
            raise
        except EngineError as exc:
            log.error("announcement failed: %s", exc, extra={"session_id": self._session_id})
            self._emit(msg.Problem(exc.code, str(exc)))
            failure = str(exc)
        await reply.finish_playing(failure)

    async def _say_fallback(self, reply: Reply, options: SessionOptions) -> None:
        """A failed reply the user heard nothing of: say so, rather than leave them
        waiting in silence. It is heard, so it is the reply's text in history too."""
        fallback = self._fallback
        if fallback and self.language and self.language != ENGLISH:
            fallback = spoken(self.language).fallback or fallback
        if not fallback or reply.modality != "audio" or reply.text or not reply.live:
            return
        try:
            speech = await self._responder.say(
                fallback, self._voice(options), options.speed, self.language
            )
        except EngineError as exc:  # the voice is what failed
            log.warning("no fallback speech: %s", exc, extra={"session_id": self._session_id})
            return
        if speech is None:
            return
        resampler = Resampler(reply.rate)
        with contextlib.suppress(EndOfStream):  # cut short by the user: that is fine
            await reply.play(resampler.pcm(speech.samples, speech.rate), fallback)
            await reply.play(resampler.flush())

    def _tool_choice(self, options: SessionOptions) -> ToolChoice:
        """A forced tool_choice forces a call in answer to the user, not in answer to the
        call's own result: that reply is in words, or the client and the model would
        pass the same call back and forth for ever."""
        forced = options.tool_choice not in ("auto", "none")
        messages = self._history.messages()
        if forced and messages and messages[-1].role == "tool":
            return "none"
        return options.tool_choice

    async def _speak(
        self,
        reply: Reply,
        request: SpeechRequest,
        turn: UserTurn | None,
        resampler: Resampler,
        calls: ServerCalls,
    ) -> None:
        async with contextlib.aclosing(self._responder.speak(request)) as pieces:
            async for piece in pieces:
                await _ended(turn)  # nothing plays before the turn has ended
                if isinstance(piece, ToolCallDelta):
                    calls.call(reply, piece, request)
                    continue
                await calls.settle_filler(reply)
                samples = resampler.pcm(piece.speech.samples, piece.speech.rate)
                await reply.play(samples, piece.text)

    async def _write(
        self, reply: Reply, request: SpeechRequest, turn: UserTurn | None, calls: ServerCalls
    ) -> None:
        async with contextlib.aclosing(self._responder.write(request)) as deltas:
            async for delta in deltas:
                await _ended(turn)  # nothing shows before the turn has ended
                if isinstance(delta, ToolCallDelta):
                    calls.call(reply, delta, request)
                else:
                    reply.write(delta)

    async def _say(self, reply: Reply, request: SpeechRequest, text: str) -> None:
        """A line of the reply said as it is (or written, in a text reply)."""
        if reply.modality == "text":
            reply.write(text if not reply.text else " " + text)
            return
        speech = await self._responder.say(text, request.voice, request.speed, self.language)
        if speech is not None:
            resampler = Resampler(reply.rate)
            await reply.play(resampler.pcm(speech.samples, speech.rate) + resampler.flush(), text)


async def _ended(turn: UserTurn | None) -> None:
    if turn is not None:
        await turn.wait_ended()
