"""The Live dialect for one call: the only code that speaks Live's wire format.

Client events come in as JSON text from a WebSocket, a data channel or a sideband
controller; each becomes a Session verb, and one the session refuses is answered
with Live's `error` event (the session goes on). The session's messages go out as
Live server events on one timeline, in milliseconds from the session's start.

Live has no turns on the wire: the user's words come as input transcript deltas,
the agent's as output transcript deltas and audio. Over a WebSocket, reply audio is
sent only a little ahead of playout, so that an interruption stops it at the client
too (Live tells a client nothing to truncate).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from app.events.audio import SPOKEN_RATE, AudioIn, AudioOut, BadAudio
from app.events.channel import Broadcast, Event, EventChannel, as_json, decode
from app.live import client_events as cmd
from app.live import server_events as events
from app.live.delegation import Delegations
from app.live.reflection import Reflection
from app.live.session_config import (
    PARAMS,
    Delegation,
    InitialItem,
    StartProblem,
    describe,
    describe_delegation,
)
from app.session import messages as msg
from app.session import refusals
from app.session.recording import Recording
from app.session.session import Session
from app.vocab.pcm import INBOUND_RATE

log = logging.getLogger(__name__)

FIXTURE_MAX_S = 30.0  # Live's limit on a fixture's audio
# What each kind of appended context becomes in the conversation the LLM reads.
CONTEXT = {
    "session.instructions.append": "{}",
    "session.thinking.append": "Background for you, not to be read out: {}",
}
ROLES: dict[str, Any] = {"developer": "system", "user": "user", "assistant": "assistant"}


class LiveDialect:
    def __init__(
        self,
        channel: EventChannel,
        *,
        model: str,
        expires_at: float,
        audio: tuple[AudioIn, AudioOut] | None = None,
        initial: Sequence[InitialItem] = (),
        stop: Callable[[], None] = lambda: None,
        started_by: str | None = None,
        delegation: Delegation | None = None,
        began: float | None = None,
        record: Callable[[str], Recording] | None = None,
        max_append_s: float = 60.0,
    ) -> None:
        """`audio`: a WebSocket's formats in and out (None over WebRTC or SIP, whose audio
        is on a track). `initial`: the start config's text history. `stop`: ends the
        call, for session.close. `started_by`: the id of the session.start event that
        made it, if it had one. `delegation`: what the start config named (None: client,
        with no delegate tool). `began`: when the session began (time.monotonic; now
        unless told: a sideband's guest dialect joins later). `record`: makes the
        call's recording from its session id (`store: true`, and the server keeps
        recordings).
        `max_append_s`: the most audio one append may carry."""
        self._out = Broadcast(channel, _too_large)
        self._channel = channel
        self._model = model
        self._expires_at = expires_at
        self._audio = audio
        self._max_append_s = max_append_s
        self._session: Session | None = None
        self._began = time.monotonic() if began is None else began
        self._muted = False  # by the client
        self._fixture: tuple[str, str | None] | None = None  # playing: (response id, event id)
        # An utterance's item id: when it began and ended on the timeline (ms).
        self._spans: dict[str, tuple[int, int | None]] = {}
        self._delegation = delegation
        self._delegations: Delegations | None = None
        self._initial = list(initial)
        self._stop = stop
        self._record = record
        self._reflection: Reflection | None = None  # the audio, while sidebands watch
        # Presses a key to the caller: a SIP call's, set by its builder.
        self.keypad: Callable[[str], None] | None = None
        self._started_by = started_by

    def attach(self, session: Session) -> None:
        """Bind the session; the start config's text history goes into it now."""
        self._session = session
        if self._record is not None:
            session.record(self._record(session.id))
        self._delegations = Delegations(
            session, self._delegation, send=self._send, speak=self._commentary, now_ms=self.now_ms
        )
        for item in self._initial:
            session.items.add(ROLES[item.role], item.content[0].text)

    @property
    def session(self) -> Session:
        assert self._session is not None, "attach() a session first"
        return self._session

    @property
    def delegations(self) -> Delegations:
        assert self._delegations is not None, "attach() a session first"
        return self._delegations

    def now_ms(self) -> int:
        """Where the session is on its timeline: the wall clock since it began, or as far
        as the user's audio has come, if that is further (a WebSocket client may send
        audio faster than it plays)."""
        wall_ms = (time.monotonic() - self._began) * 1000
        heard_ms = self.session.usage.audio_in_samples * 1000 / INBOUND_RATE
        return int(max(wall_ms, heard_ms))

    # --- the channel's side

    def opened(self) -> None:
        """The client's channel is open (a WebSocket's session.start taken): it hears its
        session."""
        self._send(events.started(self._describe(), self._started_by))

    def watch(self, controller: EventChannel) -> None:
        """A sideband controller joins: it hears every event, and the call's audio both
        ways, and may send its own."""
        self._out.watch(controller)
        self._send(events.updated(self._describe()), to=controller)
        if self._reflection is None:
            self._reflection = Reflection(self._to_sidebands, self.now_ms)
            self.session.taps.add(self._reflection)

    def unwatch(self, controller: EventChannel) -> None:
        self._out.unwatch(controller)
        if not self._out.watchers and self._reflection is not None:
            self.session.taps.remove(self._reflection)
            self._reflection = None

    def _to_sidebands(self, event: Event) -> None:
        for watcher in self._out.watchers:
            self._send(event, to=watcher)

    def receive(self, data: str | bytes, source: EventChannel | None = None) -> None:
        for _ in self._receive(data, source):
            pass

    async def receive_in_steps(self, data: str | bytes, source: EventChannel | None = None) -> None:
        """receive(), letting the loop's other work in between the steps of a long append
        (and the disk catch up with a recording)."""
        for _ in self._receive(data, source):
            await asyncio.sleep(0)
            if self.session.recording is not None:
                await self.session.recording.caught_up()

    def _receive(self, data: str | bytes, source: EventChannel | None) -> Iterator[None]:
        sender = source or self._channel
        event, problem = decode(data, sender.max_message_bytes)
        if problem is not None:
            self._send(events.error(problem[1], problem[0]), to=sender)
            return
        assert event is not None
        client_event_id = cmd.event_id_of(event)
        try:
            command = cmd.parse(event)
            if isinstance(command, cmd.AudioAppend):
                yield from self._append(command.audio)
            else:
                self._handle(command, sender, client_event_id)
        except cmd.BadEvent as exc:
            self._refuse(sender, str(exc), exc.code, exc.param, client_event_id)
        except BadAudio as exc:
            self._refuse(sender, str(exc), "invalid_audio", "audio", client_event_id)
        except StartProblem as exc:
            self._refuse(sender, str(exc), "invalid_value", exc.param, client_event_id)
        except refusals.OptionError as exc:
            param = PARAMS.get(exc.option, exc.option)
            self._refuse(sender, str(exc), "invalid_value", param, client_event_id)
        except refusals.Refused as exc:
            self._refuse(sender, str(exc), "invalid_request", None, client_event_id)
        except Exception:
            log.exception("client event failed", extra={"session_id": self.session.id})
            self._refuse(sender, "the server failed on this event", "internal", None,
                         client_event_id)  # fmt: skip

    def call_ended(self, code: str, message: str) -> None:
        """The last event: why the session closed, and what it used."""
        if self._delegations is not None:
            self._delegations.close()
        self._send(events.closed(self._describe(), code, self._seconds()))

    # --- the session's side

    def deliver(self, message: msg.SessionMessage) -> None:
        match message:
            case msg.SpeechStarted(item_id, audio_start_ms):
                self._spans[item_id] = (audio_start_ms, None)
                if len(self._spans) > 64:  # utterances dropped as no turn leave theirs
                    self._spans.pop(next(iter(self._spans)))
            case msg.SpeechStopped(item_id, audio_end_ms) if item_id in self._spans:
                self._spans[item_id] = (self._spans[item_id][0], audio_end_ms)
            case msg.UserTranscribed(item_id, transcript) if transcript:
                start, end = self._spans.pop(item_id, (None, None))
                end = end if end is not None else self.now_ms()
                start = start if start is not None else end
                self._send(events.input_transcript(transcript, start, end))
            case msg.ClauseSpoken(delta=delta):
                at = self.now_ms()
                self._send(events.output_transcript(delta, at, at))
            case msg.ReplyEnded(response_id=response_id, status=status):
                self.delegations.take(message)
                if self._fixture is not None and self._fixture[0] == response_id:
                    if status == "completed":
                        self._send(events.acknowledged(
                            "session.output_audio.fixture.played", self._fixture[1]))  # fmt: skip
                    self._fixture = None
                    self._hear()
                self._send(events.usage(self._seconds()))
            case msg.KeyPressed(key):
                self._to_sidebands(events.dtmf_received(key))  # Live tells only them
            case msg.Problem(code, text):
                self._send(events.error(text, code, type_="server_error"))

    def audio_delta(self, pcm24k: bytes) -> str:
        """Reply audio for a WebSocket, in its output format."""
        assert self._audio is not None, "a WebSocket call's dialect has its formats"
        return as_json(events.output_audio(self._audio[1].encode(pcm24k)))

    # --- commands

    def _handle(
        self, command: cmd.ClientCommand, sender: EventChannel, client_event_id: str | None
    ) -> None:
        session = self.session
        match command:
            case cmd.Start():
                raise cmd.BadEvent(
                    "the session has already started: send session.start once, first",
                    "session_already_started",
                )
            case cmd.Update(session=update):
                if update.delegation is not None:
                    self.delegations.update(update.delegation)
                self._send(events.updated(self._describe(), client_event_id))
            case cmd.Mute() | cmd.Unmute():
                self._muted = isinstance(command, cmd.Mute)
                self._hear()
                kind = "muted" if self._muted else "unmuted"
                self._send(events.acknowledged(f"session.input_audio.{kind}", client_event_id))
            case cmd.InstructionsAppend() | cmd.ThinkingAppend() | cmd.CommentaryAppend():
                self._context(command, client_event_id)
            case cmd.Close():
                self._stop()
            case cmd.ResponseCreate():
                self.delegations.create_response()
            case cmd.ResponseItemCreate(item=item):
                self.delegations.add_item(item)
            case cmd.Decisions(type=kind):
                raise cmd.BadEvent(
                    f"{kind} requires Decisions delegation, which this server does not run",
                    "invalid_request",
                    "type",
                )
            case cmd.FixturePlay(audio=audio):
                self._play_fixture(audio, client_event_id)
            case cmd.DtmfSend(event=key):
                self._press(key, sender, client_event_id)
        session.touch()

    def _context(
        self,
        command: cmd.InstructionsAppend | cmd.ThinkingAppend | cmd.CommentaryAppend,
        client_event_id: str | None,
    ) -> None:
        self.delegations.appended(command.type, command.delegation_id)
        if isinstance(command, cmd.CommentaryAppend):
            self._commentary(command.content)
        else:
            self.session.items.add("system", CONTEXT[command.type].format(command.content))
        kind = command.type.removesuffix(".append") + ".appended"
        self._send(events.appended(kind, self.now_ms(), client_event_id))

    def _commentary(self, content: str) -> None:
        """Something for the agent to tell the user: said as it is, after whatever it is
        saying now. (Reworded by SmolLM2, a result came out as "I'm ready to help".)"""
        self.session.announce(text=content)

    def _play_fixture(self, audio: str, client_event_id: str | None) -> None:
        """A client's clip, played in place of the agent's speech; the agent hears
        silence until it has played."""
        if self._fixture is not None:
            raise cmd.BadEvent("a fixture is already playing", "invalid_request")
        clip = AudioIn("audio/pcm", SPOKEN_RATE)
        if clip.seconds(audio) > FIXTURE_MAX_S + 0.1:
            raise BadAudio(f"a fixture is at most {FIXTURE_MAX_S:g} s of 24 kHz pcm16")
        pcm = clip.raw(audio)
        if self.session.reply is not None:
            with contextlib.suppress(refusals.Refused):
                self.session.cancel_response()
        self._fixture = (self.session.announce(audio24k=pcm), client_event_id)
        self._hear()
        self._send(events.acknowledged("session.output_audio.fixture.playing", client_event_id))

    def _press(self, key: str, sender: EventChannel, client_event_id: str | None) -> None:
        """transport.dtmf.send: a key pressed to a SIP caller; told to the sideband."""
        if self.keypad is None:
            raise cmd.BadEvent("transport.dtmf.send is for SIP calls only", "invalid_request")
        try:
            self.keypad(key)
        except ValueError as exc:
            raise cmd.BadEvent(str(exc), "dtmf_unavailable", "event") from None
        self._send(events.dtmf_sent(key, client_event_id), to=sender)

    def _hear(self) -> None:
        """The agent hears silence while the client has muted it, or a fixture plays."""
        self.session.muted = self._muted or self._fixture is not None

    def _append(self, audio: str) -> Iterator[None]:
        """An append's audio to the turn detector, letting other calls in between steps."""
        if self._audio is None:
            raise cmd.BadEvent(
                "this session's audio is on its media track, not in events", "invalid_request"
            )
        steps = self._audio[0].append(audio, self._max_append_s)
        for n, pcm in enumerate(list(steps)):  # all of it refused, or none
            if n:
                yield
            self.session.push_audio(pcm)

    def _seconds(self) -> float:
        return time.monotonic() - self._began

    def _describe(self) -> dict[str, Any]:
        audio_format = None
        if self._audio is not None:
            audio_format = (self._audio[0].name, self._audio[0].rate)
        delegation = describe_delegation(self.delegations.config) or {"type": "client"}
        return describe(
            self.session.options,
            self.session.id,
            self._model,
            expires_at=self._expires_at,
            audio_format=audio_format,
            delegation=delegation,
            initial=self._initial,
            store=self._record is not None,
        )

    def _refuse(
        self,
        sender: EventChannel,
        message: str,
        code: str,
        param: str | None,
        client_event_id: str | None,
    ) -> None:
        problem = events.error(message[:1000], code, param=param, client_event_id=client_event_id)
        self._send(problem, to=sender)

    def _send(self, event: Event, *, to: EventChannel | None = None) -> None:
        self._out.send(event, to=to, session_id=self._session.id if self._session else "")


def _too_large(type_: str, size: int, why: str) -> Event:
    return events.error(
        f"a {type_} event of {size} bytes was not sent: {why}", "event_too_large",
        type_="server_error",
    )  # fmt: skip
