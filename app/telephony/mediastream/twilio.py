"""Twilio Media Streams, spoken by the server: what a `<Connect><Stream>` call sends us
and what we send back. Telnyx's media streaming uses the same messages with a few
differences, taken here too: the stream's id is `stream_id` (not `streamSid`), the format
is `start.media_format` ({encoding: PCMU or PCMA, sample_rate, channels}), and it may
send `error` frames.

In:  connected, start (the stream's id and audio format), media (base64 G.711 at 8 kHz;
     only the caller's track), mark (the carrier played up to one of our marks), dtmf,
     stop, and Telnyx's error.
Out: media (the reply, in the stream's G.711 law), mark (after each piece), clear
     (barge-in: drop what is buffered). Each carries the stream's id under its key.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import logging
import time
from collections.abc import Awaitable
from typing import Any

import numpy as np

from app.audio import g711
from app.audio.resample import Resampler
from app.session import messages as msg
from app.session.messages import SessionMessage
from app.session.session import Session
from app.telephony.mediastream.playout import MarkedPlayout
from app.vocab.pcm import BYTES_PER_S, INBOUND_RATE
from app.ws.transport import WsTransport

log = logging.getLogger(__name__)

RATE = g711.RATE
FORMAT = {"encoding": "audio/x-mulaw", "sampleRate": RATE, "channels": 1}
# Telnyx's start.media_format, by encoding.
TELNYX_LAWS: dict[str, g711.Law] = {"PCMU": "ulaw", "PCMA": "alaw"}
CALLERS_TRACK = (None, "inbound", "inbound_track")  # both_tracks would also send ours
UNSUPPORTED_DATA = 1007  # the WebSocket close code for a message we cannot take
# A carrier sends 20 ms a message (about 250 bytes); this is seconds of audio. Larger
# messages are refused (the stream closes) before they are parsed.
MAX_MESSAGE_BYTES = 64 * 1024
# A long message's audio reaches the session 200 ms at a time: a second of it through
# the echo canceller held the loop long enough (~150 ms on a slow 2-core machine) that,
# under a flood on two streams, /readyz waited 1.9 s for its turn.
STEP_BYTES = BYTES_PER_S // 5
MAX_ID_CHARS = 64  # a stream's id, as kept, logged and echoed on every message we send


class BadStreamMessage(ValueError):
    """A message that is not Twilio's; the stream is closed with its reason."""


class TwilioDialect:
    def __init__(self, transport: WsTransport) -> None:
        self.session_id = transport.session_id
        self.stream_sid = ""
        self.law: g711.Law = "ulaw"
        self._id_key = "streamSid"  # Telnyx: stream_id
        self._transport = transport
        self._session: Session | None = None
        self._playout: MarkedPlayout | None = None
        self._inbound = Resampler(INBOUND_RATE)
        self._heard = b""  # the last message's audio, at 16 kHz, for the session
        self.last_media_at: float | None = None  # the caller's audio: a stream sends it always

    def attach(self, session: Session, playout: MarkedPlayout) -> None:
        self._session, self._playout = session, playout

    # --- in -----------------------------------------------------------------------------

    def receive(self, data: str | bytes) -> Awaitable[None] | None:
        """One message from the carrier. One that is not Twilio's ends this stream (code
        1007, with the reason: the socket's reader awaits the close it returns); `stop`
        ends the call."""
        try:
            self.parse(data, in_steps=True)
        except BadStreamMessage as exc:
            log.warning("media stream refused: %s", exc, extra={"session_id": self.session_id})
            return self._transport.close(UNSUPPORTED_DATA, str(exc)[:120])
        return self._hear_in_steps() if self._heard else None

    def _hear_now(self) -> None:
        heard, self._heard = self._heard, b""
        if heard:
            assert self._session is not None
            self._session.push_audio(heard)

    async def _hear_in_steps(self) -> None:
        """A long message's audio reaches the session a step at a time, the loop's other
        work let in between (each step goes through the echo canceller)."""
        heard, self._heard = self._heard, b""
        assert self._session is not None
        for offset in range(0, len(heard), STEP_BYTES):
            self._session.push_audio(heard[offset : offset + STEP_BYTES])
            await asyncio.sleep(0)

    def parse(self, data: str | bytes, *, in_steps: bool = False) -> None:
        """Act on one message; BadStreamMessage for one that is not Twilio's. `in_steps`:
        audio of more than a step is left for _hear_in_steps()."""
        if len(data) > MAX_MESSAGE_BYTES:
            raise BadStreamMessage(f"a message of {len(data)} bytes (at most {MAX_MESSAGE_BYTES})")
        try:
            event = json.loads(data)
            kind = event["event"]
        except (ValueError, TypeError, KeyError, RecursionError) as exc:
            raise BadStreamMessage(f"not a media stream message: {str(data)[:80]!r}") from exc
        try:
            self._handle(kind, event)
            if not in_steps or len(self._heard) <= STEP_BYTES:
                self._hear_now()
        except BadStreamMessage:
            raise
        except (
            KeyError, TypeError, ValueError, AttributeError, OverflowError, binascii.Error
        ) as exc:  # fmt: skip
            raise BadStreamMessage(
                f"a malformed {str(kind)[:40]!r} message: {exc!r}"[:200]
            ) from exc

    def _handle(self, kind: str, event: dict[str, Any]) -> None:
        assert self._session is not None and self._playout is not None
        match kind:
            case "connected":
                pass
            case "start":
                self._start(event)
            case "media":
                if not self.stream_sid:
                    raise BadStreamMessage("media before start")
                if event["media"].get("track") not in CALLERS_TRACK:
                    return
                encoded = base64.b64decode(event["media"]["payload"], validate=True)
                pcm8k = np.frombuffer(g711.decode(encoded, self.law), dtype=np.int16)
                self.last_media_at = time.monotonic()
                self._heard += self._inbound.pcm(pcm8k, RATE)
            case "mark":
                self._playout.mark_echoed(str(event["mark"]["name"]))
            case "dtmf":
                try:
                    self._session.press(str(event["dtmf"]["digit"]))
                except ValueError as exc:
                    raise BadStreamMessage(str(exc)) from exc
            case "stop":
                self._transport.ended.set()
            case "error":  # Telnyx tells us of a frame of ours it could not take
                log.warning("the carrier reports an error: %s", str(event.get("payload"))[:200],
                            extra={"session_id": self.session_id})  # fmt: skip
            case _:
                raise BadStreamMessage(f"unknown event {kind!r}")

    def _start(self, event: dict[str, Any]) -> None:
        start = event["start"]
        if "media_format" in start:  # Telnyx
            fmt = start["media_format"]
            law = TELNYX_LAWS.get(str(fmt.get("encoding")).upper())
            if (
                law is None
                or int(fmt.get("sample_rate", RATE)) != RATE
                or fmt.get("channels", 1) != 1
            ):
                raise BadStreamMessage(f"unsupported audio {fmt}: only PCMU or PCMA, 8000 Hz, mono")
            self.law, self._id_key = law, "stream_id"
            self.stream_sid = _stream_id(event.get("stream_id") or start["stream_id"])
        else:
            fmt = start.get("mediaFormat", FORMAT)
            if {k: fmt.get(k) for k in FORMAT} != FORMAT:
                raise BadStreamMessage(f"unsupported audio {fmt}: only {FORMAT}")
            self.stream_sid = _stream_id(start.get("streamSid") or event["streamSid"])
        call = str(start.get("callSid") or start.get("call_control_id"))[:MAX_ID_CHARS]
        log.info("media stream %s started (call %s, %s)", self.stream_sid, call, self.law,
                 extra={"session_id": self.session_id})  # fmt: skip

    # --- out ----------------------------------------------------------------------------

    async def send_media(self, pcm8k: bytes) -> None:
        """Reply audio: waits while the socket's outbox is full (backpressure)."""
        payload = base64.b64encode(g711.encode(pcm8k, self.law)).decode()
        await self._send_when_room({"event": "media", "media": {"payload": payload}})

    async def send_mark(self, name: str) -> None:
        await self._send_when_room({"event": "mark", "mark": {"name": name}})

    async def _send_when_room(self, event: dict[str, Any]) -> None:
        await self._transport.send_when_room(json.dumps({**event, self._id_key: self.stream_sid}))

    def deliver(self, message: SessionMessage) -> None:
        """Only barge-in has a word in this protocol: `clear`. The rest (transcripts,
        reply text) stays in the server's log."""
        if isinstance(message, msg.ReplyAudioCleared):
            clear = {"event": "clear", self._id_key: self.stream_sid}
            self._transport.send_text(json.dumps(clear))

    def call_ended(self, code: str, message: str) -> None:
        log.info("media stream %s ends: %s", self.stream_sid, code,
                 extra={"session_id": self.session_id})  # fmt: skip


def _stream_id(value: object) -> str:
    """A stream's id as the carrier gave it: text, and no longer than any carrier's."""
    if not isinstance(value, str | int) or not str(value):
        raise BadStreamMessage(f"a stream id that is not text: {str(value)[:40]!r}")
    if len(str(value)) > MAX_ID_CHARS:
        raise BadStreamMessage(f"a stream id of {len(str(value))} characters")
    return str(value)
