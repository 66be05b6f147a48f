"""The OpenAI Realtime dialect for one call: the only code that speaks its wire format.

Client events come in as JSON text from a data channel or a WebSocket; each
is parsed into a typed command and becomes a Session verb, and a verb the
session refuses is answered with an `error` event (the session goes on). The
session's typed messages go out as GA server events.
"""

from __future__ import annotations

import asyncio
import base64
import logging
from collections.abc import Iterator
from typing import Any

import numpy as np

from app.audio.resample import Resampler
from app.events.audio import AudioIn, AudioOut, BadAudio, FormatName
from app.events.channel import Broadcast, EventChannel, NoChannel, as_json, decode
from app.realtime import client_events as cmd
from app.realtime import server_events as events
from app.realtime.session_config import (
    PARAMS,
    RATE,
    describe,
    formats,
    response_changes,
    to_changes,
)
from app.session import refusals
from app.session.messages import (
    MessageStarted,
    ReplyAudioCleared,
    ReplyAudioStarted,
    ReplyAudioStopped,
    SessionMessage,
)
from app.session.session import Session
from app.vocab.pcm import INBOUND_RATE

log = logging.getLogger(__name__)

# Each refusal's error code, and the field it is about.
REFUSALS: dict[type[refusals.Refused], tuple[str, str | None]] = {
    refusals.NothingToCommit: ("input_audio_buffer_commit_empty", None),
    refusals.ResponseInProgress: ("conversation_already_has_active_response", None),
    refusals.NoActiveResponse: ("response_cancel_not_active", None),
    refusals.NothingPlaying: ("output_audio_buffer_empty", None),
    refusals.UnknownItem: ("item_not_found", "item_id"),
    refusals.ItemExists: ("invalid_value", "item.id"),
    refusals.ItemInUse: ("invalid_value", "item_id"),
    refusals.BadTruncation: ("invalid_value", "audio_end_ms"),
    refusals.CannotAnswerText: ("unsupported_in_echo_mode", None),
    refusals.ItemTooLong: ("invalid_value", "item.content"),
    refusals.ConversationFull: ("conversation_full", "item"),
}

# What a client does that keeps its session from idling out, once done: speaking (the
# turn detector's to say), and these. Clearing the buffer, changing the session or
# reading items back is not: a client doing only that would hold its slot for ever.
ACTIVITY = (
    cmd.InputAudioCommit, cmd.ItemCreate, cmd.ResponseCreate, cmd.ResponseCancel,
    cmd.OutputAudioClear,
)  # fmt: skip
# Messages about the WebRTC track's playout.
PLAYOUT = (ReplyAudioStarted, ReplyAudioStopped, ReplyAudioCleared)


__all__ = ["EventChannel", "NoChannel", "RealtimeDialect"]


class RealtimeDialect:
    def __init__(
        self, channel: EventChannel, *, model: str, webrtc: bool, max_append_s: float = 60.0
    ) -> None:
        """`webrtc`: the audio goes on a WebRTC track, so the client hears about its
        playout (`output_audio_buffer.*`); over a WebSocket the audio is in the events.
        `max_append_s`: the most audio one input_audio_buffer.append may carry."""
        self._channel = channel
        self._max_append_s = max_append_s
        self._out = Broadcast(channel, _too_large)  # the channel, and sideband controllers
        self._model = model
        self._webrtc = webrtc
        self._session: Session | None = None
        # (response_id, item_id, output_index) of the reply's words being heard.
        self._speaking: tuple[str, str, int] = ("", "", 0)
        # The WebSocket's audio, in and out (a WebRTC call's audio is on its track); each
        # kept while its format is: resampling is stateful along a stream.
        self._audio_in = AudioIn()
        self._audio_out = AudioOut()

    def attach(self, session: Session) -> None:
        self._session = session

    @property
    def session(self) -> Session:
        assert self._session is not None, "attach() a session first"
        return self._session

    # --- the channel's side

    def opened(self) -> None:
        """The event channel is open: greet the client with its session."""
        self._send(events.session_created(self._describe()))

    def watch(self, controller: EventChannel) -> None:
        """A sideband controller joins: it hears every event and may send its own."""
        self._out.watch(controller)
        self._send(events.session_created(self._describe()), to=controller)

    def unwatch(self, controller: EventChannel) -> None:
        self._out.unwatch(controller)

    def receive(self, data: str | bytes, source: EventChannel | None = None) -> None:
        """One message from the client (or from a sideband controller, `source`): handled
        now; what it changes is told to everyone, a refusal only to the sender."""
        for _ in self._receive(data, source):
            pass

    async def receive_in_steps(self, data: str | bytes, source: EventChannel | None = None) -> None:
        """receive(), with the event loop's other work let in between the steps of a long
        append's audio; the client's next message waits for the last step."""
        for _ in self._receive(data, source):
            await asyncio.sleep(0)

    def _receive(self, data: str | bytes, source: EventChannel | None) -> Iterator[None]:
        """Handles one message; yields between the steps of an append's audio."""
        sender = source or self._channel
        event, problem = decode(data, sender.max_message_bytes)
        if problem is not None:
            self._send(events.error(problem[1], code=problem[0]), to=sender)
            return
        assert event is not None
        try:
            command = cmd.parse(event)
            if isinstance(command, cmd.InputAudioAppend):
                # Audio is activity when it is speech (the turn detector says so).
                yield from self._append(command.audio)
            else:
                self._handle(command)
                if isinstance(command, ACTIVITY):
                    self.session.touch()
        except cmd.BadEvent as exc:
            self._refuse(sender, str(exc), exc.code, exc.param, event)
        except BadAudio as exc:
            self._refuse(sender, str(exc), "invalid_audio", "audio", event)
        except refusals.OptionError as exc:
            self._refuse(sender, str(exc), "invalid_value", PARAMS.get(exc.option), event)
        except refusals.Refused as exc:
            code, param = REFUSALS.get(type(exc), ("invalid_value", None))
            self._refuse(sender, str(exc), code, param, event)
        except Exception:
            # A bug must cost this event, not the call.
            log.exception("client event failed", extra={"session_id": self.session.id})
            self._refuse(sender, "the server failed on this event", "internal", None, event)

    def call_ended(self, code: str, message: str) -> None:
        """The call is over; the last event the client gets says why (nothing when the
        client itself left: `message` is empty)."""
        if message:
            self._send(events.error(message, code=code))

    # --- the session's side

    def deliver(self, message: SessionMessage) -> None:
        if isinstance(message, MessageStarted):
            self._speaking = (message.response_id, message.item_id, message.output_index)
        elif isinstance(message, PLAYOUT) and not self._webrtc:
            return
        transcription = self._session is None or self._session.options.transcription
        for event in events.for_message(message, transcription=transcription):
            self._send(event)

    def audio_delta(self, pcm24k: bytes) -> str:
        """Reply audio for a WebSocket, in its output format, labelled with its reply."""
        return as_json(events.audio_delta(*self._speaking, self._audio_out.encode(pcm24k)))

    def _use_formats(self, audio_in: FormatName | None, audio_out: FormatName | None) -> None:
        if audio_in is not None and audio_in != self._audio_in.name:
            self._audio_in = AudioIn(audio_in)
        if audio_out is not None and audio_out != self._audio_out.name:
            self._audio_out = AudioOut(audio_out)

    # --- commands

    def _handle(self, command: cmd.ClientCommand) -> None:
        session = self.session
        match command:
            case cmd.SessionUpdate(session=config):
                session.configure(to_changes(config))
                self._use_formats(*formats(config))
                self._send(events.session_updated(self._describe()))
            case cmd.InputAudioCommit():
                session.commit_input()
            case cmd.InputAudioClear():
                session.clear_input()
                self._send(events.input_cleared())
            case cmd.ItemCreate(item=cmd.FunctionCallOutputItem() as output):
                session.items.add_tool_output(output.call_id, output.output, output.id)
            case cmd.ItemCreate(item=cmd.ApprovalResponseItem() as answer):
                session.approve(
                    answer.approval_request_id, approve=answer.approve,
                    reason=answer.reason, item_id=answer.id,
                )  # fmt: skip
            case cmd.ItemCreate(item=cmd.MessageItem() as item):
                session.items.add(item.role, item.text, item.id)
            case cmd.ItemRetrieve(item_id=item_id):
                message = session.items.retrieve(item_id)
                kept = _pcm24k_base64(message.audio) if message.audio is not None else None
                self._send(events.item_retrieved(message, kept))
            case cmd.ItemDelete(item_id=item_id):
                session.items.delete(item_id)
            case cmd.ItemTruncate(item_id=item_id, audio_end_ms=audio_end_ms):
                session.items.truncate(item_id, audio_end_ms)
            case cmd.ResponseCreate(response=cmd.ResponseOptions() as options):
                changes = response_changes(options.tools, options.tool_choice)
                session.create_response(options.instructions, changes)
            case cmd.ResponseCreate():
                session.create_response()
            case cmd.ResponseCancel(response_id=response_id):
                session.cancel_response(response_id)
            case cmd.OutputAudioClear():
                session.clear_output()

    def _append(self, audio: str) -> Iterator[None]:
        """An append's audio to the turn detector, letting other calls in between steps."""
        steps = self._audio_in.append(audio, self._max_append_s)
        for n, pcm in enumerate(list(steps)):  # all of it refused, or none
            if n:
                yield
            self.session.push_audio(pcm)

    def _describe(self) -> dict[str, Any]:
        formats = (self._audio_in.name, self._audio_out.name)
        return describe(self.session.options, self.session.id, self._model, formats)

    def _refuse(
        self,
        sender: EventChannel,
        message: str,
        code: str,
        param: str | None,
        event: dict[str, Any],
    ) -> None:
        event_id = cmd.event_id_of(event)
        self._send(events.client_error(message, code, param, event_id), to=sender)

    def _send(self, event: events.Event, *, to: EventChannel | None = None) -> None:
        self._out.send(event, to=to, session_id=self._session.id if self._session else "")


def _too_large(type_: str, size: int, why: str) -> events.Event:
    """The client cannot take an event; it hears that it missed one."""
    return events.error(
        f"a {type_} event of {size} bytes was not sent: {why}",
        type_="server_error", code="event_too_large",
    )  # fmt: skip


def _pcm24k_base64(pcm16k: bytes) -> str:
    """Kept speech, in the session's audio format."""
    resampler = Resampler(RATE)  # one utterance, start to end: a fresh one is right
    samples = np.frombuffer(pcm16k, dtype=np.int16)
    return base64.b64encode(resampler.pcm(samples, INBOUND_RATE) + resampler.flush()).decode()
