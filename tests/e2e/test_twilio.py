"""Phone calls in Twilio's Media Streams protocol, with a client written from Twilio's
published message format: μ-law 8 kHz in and out, marks, clear on barge-in, refusals."""

from __future__ import annotations

import asyncio
import base64
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
import websockets
from twilio.request_validator import RequestValidator

from app.audio import g711
from app.audio.level import rms_db
from app.audio.resample import Resampler
from tests.support.server import ServerProcess, until_in_use
from tests.support.speech import telephone_pcm, transcribe, words

pytestmark = pytest.mark.e2e

CHUNK = 160  # 20 ms of μ-law at 8 kHz, as Twilio sends it


def ulaw_of(wav: Path) -> bytes:
    return g711.encode(telephone_pcm(wav), "ulaw")


class Caller:
    """The carrier's side of one stream: sends the call's audio, plays back what comes,
    echoes marks as Twilio does once the audio before them has played."""

    def __init__(self, ws: websockets.ClientConnection) -> None:
        self.ws = ws
        self.heard = bytearray()  # μ-law
        self.events: list[dict[str, Any]] = []
        self._arrived = asyncio.Event()
        self._sending: set[asyncio.Task[None]] = set()
        self._reader = asyncio.create_task(self._read())

    async def start(self, sid: str = "MZ0001") -> None:
        await self.send({"event": "connected", "protocol": "Call", "version": "1.0.0"})
        ulaw = {"encoding": "audio/x-mulaw", "sampleRate": 8000, "channels": 1}
        await self.send({"event": "start", "sequenceNumber": "1", "streamSid": sid,
                         "start": {"streamSid": sid, "callSid": "CA0001", "tracks": ["inbound"],
                                   "mediaFormat": ulaw}})  # fmt: skip

    async def send(self, event: dict[str, Any]) -> None:
        await self.ws.send(json.dumps(event))

    async def say(self, ulaw: bytes, then_silence_s: float = 1.5) -> None:
        """Real time, 20 ms a message, as a phone line delivers it."""
        audio = ulaw + g711.encode(bytes(int(then_silence_s * 8_000) * 2), "ulaw")
        for offset in range(0, len(audio), CHUNK):
            payload = base64.b64encode(audio[offset : offset + CHUNK]).decode()
            await self.send({"event": "media", "streamSid": "MZ0001",
                             "media": {"track": "inbound", "payload": payload}})  # fmt: skip
            await asyncio.sleep(0.02)

    async def _read(self) -> None:
        loop = asyncio.get_running_loop()
        play_end = 0.0  # when what we were sent will have played
        pending: list[tuple[asyncio.TimerHandle, dict[str, Any]]] = []
        async for raw in self.ws:
            event = json.loads(raw)
            self.events.append(event)
            self._arrived.set()
            now = loop.time()
            if event["event"] == "media":
                audio = base64.b64decode(event["media"]["payload"])
                self.heard += audio
                play_end = max(now, play_end) + len(audio) / 8_000
            elif event["event"] == "mark":  # echoed once the audio before it has played
                echo = {"event": "mark", "streamSid": "MZ0001", "mark": event["mark"]}
                pending.append((loop.call_at(max(now, play_end), self._echo, echo), echo))
            elif event["event"] == "clear":  # the buffer is dropped; its marks come back now
                play_end = now
                for handle, echo in pending:
                    if handle.when() > now:
                        handle.cancel()
                        self._echo(echo)
                pending.clear()

    def _echo(self, event: dict[str, Any]) -> None:
        self._sending.add(task := asyncio.create_task(self.send(event)))
        task.add_done_callback(self._sending.discard)

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [event for event in self.events if event["event"] == kind]

    async def until_quiet(self, quiet_s: float = 2.0) -> None:
        """Until the reply has stopped coming for `quiet_s`."""
        while True:
            size = len(self.heard)
            await asyncio.sleep(quiet_s)
            if len(self.heard) == size:
                return

    async def wait_for(self, kind: str, timeout_s: float = 60) -> None:
        async with asyncio.timeout(timeout_s):
            while not self.of(kind):
                self._arrived.clear()
                await self._arrived.wait()


def stream_url(server: ServerProcess) -> str:
    return f"ws://127.0.0.1:{server.port}/twilio/stream"


async def test_the_voice_webhook_connects_the_call_to_our_stream(
    echo_server: ServerProcess,
) -> None:
    async with httpx.AsyncClient() as http:
        twiml = (await http.post(f"{echo_server.url}/twilio/voice", data={"CallSid": "CA1"})).text
    assert f'<Stream url="{stream_url(echo_server)}"/>' in twiml
    assert "<Connect>" in twiml


async def test_a_call_is_heard_and_answered_in_mulaw_with_marks(
    echo_server: ServerProcess, speech: Callable[[str], Path]
) -> None:
    question = ulaw_of(speech("Please turn on the lights in the kitchen."))
    async with websockets.connect(stream_url(echo_server)) as ws:
        caller = Caller(ws)
        await caller.start()
        await caller.say(question)
        await caller.wait_for("media")
        await asyncio.sleep(3)  # the echo plays back
        reply = np.frombuffer(g711.decode(bytes(caller.heard), "ulaw"), dtype=np.int16)
        assert rms_db(reply) > -40, "the echo of the question came back"
        assert len(reply) > 8_000, "at least a second of it"
        names = [int(event["mark"]["name"]) for event in caller.of("mark")]
        assert names and names == sorted(names), "a mark after each piece, in order"
        await caller.send({"event": "stop", "streamSid": "MZ0001", "stop": {"callSid": "CA0001"}})
        await until_in_use(echo_server.url, 0)  # stop frees the slot


async def test_talking_over_the_reply_clears_the_carriers_buffer(
    echo_server: ServerProcess, speech: Callable[[str], Path]
) -> None:
    question = ulaw_of(speech("Please turn on the lights in the kitchen and the hall."))
    async with websockets.connect(stream_url(echo_server)) as ws:
        caller = Caller(ws)
        await caller.start()
        await caller.say(question, then_silence_s=0.8)
        await caller.wait_for("media")
        # Over the echo agent's reply. Not the same recording again: to the server's echo
        # canceller, the very audio it is playing is the agent's own echo.
        over = ulaw_of(speech("Wait, I would rather hear about the garden instead."))
        await caller.say(over, then_silence_s=0.5)
        await caller.wait_for("clear", timeout_s=30)


async def test_malformed_messages_end_that_stream_only(echo_server: ServerProcess) -> None:
    async with websockets.connect(stream_url(echo_server)) as good:
        caller = Caller(good)
        await caller.start()
        async with websockets.connect(stream_url(echo_server)) as bad:
            await bad.send("{not json")
            with pytest.raises(websockets.ConnectionClosed) as closed:
                await asyncio.wait_for(bad.recv(), 10)
            assert closed.value.rcvd is not None and closed.value.rcvd.code == 1007
        async with websockets.connect(stream_url(echo_server)) as bad:
            ulaw = {"encoding": "audio/x-mulaw", "sampleRate": 8000, "channels": 1}
            start = {"streamSid": "MZ2", "mediaFormat": ulaw}
            await bad.send(json.dumps({"event": "start", "streamSid": "MZ2", "start": start}))
            await bad.send(json.dumps({"event": "dtmf", "dtmf": {"digit": "Z"}}))
            with pytest.raises(websockets.ConnectionClosed) as closed:
                await asyncio.wait_for(bad.recv(), 10)
            assert closed.value.rcvd is not None and closed.value.rcvd.code == 1007
            assert "not a keypad key" in closed.value.rcvd.reason
        await caller.say(g711.encode(bytes(3200), "ulaw"), then_silence_s=0)
        assert good.state == websockets.State.OPEN, "the other call goes on"


async def test_a_full_pool_rejects_the_call_as_busy(start_server) -> None:  # type: ignore[no-untyped-def]
    server = start_server("--agent", "echo", "--max-sessions", "1")
    async with websockets.connect(stream_url(server)) as first:
        caller = Caller(first)
        await caller.start()
        await until_in_use(server.url, 1)
        async with httpx.AsyncClient() as http:
            twiml = (await http.post(f"{server.url}/twilio/voice")).text
        assert '<Reject reason="busy"/>' in twiml, "Twilio plays the caller a busy signal"
        async with websockets.connect(stream_url(server)) as second:
            with pytest.raises(websockets.ConnectionClosed) as closed:
                await asyncio.wait_for(second.recv(), 10)
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 1008


async def test_the_agent_answers_a_phone_question_in_speech(
    agent_server: ServerProcess, speech: Callable[[str], Path], whisper
) -> None:  # type: ignore[no-untyped-def]
    question = ulaw_of(speech("What is the capital of France?"))
    async with websockets.connect(stream_url(agent_server)) as ws:
        caller = Caller(ws)
        await caller.start()
        await caller.say(question)
        await caller.wait_for("media", timeout_s=120)
        await caller.until_quiet()
    pcm8k = g711.decode(bytes(caller.heard), "ulaw")
    resampler = Resampler(48_000)
    reply = np.frombuffer(resampler.pcm(np.frombuffer(pcm8k, np.int16), 8_000), np.int16)
    heard = transcribe(whisper, reply)
    assert words(heard), f"Whisper hears words in the agent's phone reply: {heard!r}"


async def test_keys_pressed_on_the_phone_are_answered_by_the_agent(
    agent_server: ServerProcess,
) -> None:
    """No speech at all: the keypad entry alone is the caller's turn."""
    async with websockets.connect(stream_url(agent_server)) as ws:
        caller = Caller(ws)
        await caller.start()
        line = asyncio.create_task(caller.say(b"", then_silence_s=60))  # the line stays open
        try:
            for digit in "1#":
                await caller.send({"event": "dtmf", "streamSid": "MZ0001",
                                   "dtmf": {"track": "inbound_track", "digit": digit}})  # fmt: skip
            await caller.wait_for("media", timeout_s=60)
            await caller.until_quiet()  # the whole reply: its first piece may be "Sure!"
        finally:
            line.cancel()
    assert len(caller.heard) > 8_000 * 0.5, "the agent spoke its answer to the keys"


async def test_a_telnyx_stream_in_a_law_is_answered_in_its_own_terms(
    echo_server: ServerProcess, speech: Callable[[str], Path], whisper
) -> None:  # type: ignore[no-untyped-def]
    """Telnyx's variant: `stream_id`, `start.media_format` (here PCMA), `error` frames, and
    media tracks of which only the caller's is ours to hear."""
    said = telephone_pcm(speech("Please read back my account number."))
    alaw = g711.encode(said + bytes(8_000 * 2), "alaw")  # then a second of silence
    fmt = {"encoding": "PCMA", "sample_rate": 8000, "channels": 1}
    start = {"call_control_id": "v3:c1", "media_format": fmt}
    error = {"code": 100002, "title": "Unknown error"}
    async with websockets.connect(stream_url(echo_server)) as ws:
        await ws.send(json.dumps({"event": "connected", "version": "1.0.0"}))
        await ws.send(json.dumps({"event": "start", "stream_id": "ST1", "start": start}))
        await ws.send(json.dumps({"event": "error", "stream_id": "ST1", "payload": error}))
        for offset in range(0, len(alaw), 160):
            chunk = base64.b64encode(alaw[offset : offset + 160]).decode()
            for track in ("inbound", "outbound"):  # both tracks: the outbound one is ignored
                media = {"track": track, "payload": chunk}
                await ws.send(json.dumps({"event": "media", "stream_id": "ST1", "media": media}))
            await asyncio.sleep(0.02)
        heard = bytearray()
        while True:  # until the reply has stopped coming for a while
            try:
                event = json.loads(await asyncio.wait_for(ws.recv(), 2 if heard else 30))
            except TimeoutError:
                break
            if event["event"] == "media":
                assert event["stream_id"] == "ST1" and "streamSid" not in event
                heard += base64.b64decode(event["media"]["payload"])
        await ws.send(json.dumps({"event": "stop", "stream_id": "ST1"}))
    pcm8k = np.frombuffer(g711.decode(bytes(heard), "alaw"), np.int16)
    echoed = transcribe(whisper, np.frombuffer(Resampler(48_000).pcm(pcm8k, 8_000), np.int16))
    assert {"account", "number"} <= set(words(echoed)), echoed
    await until_in_use(echo_server.url, 0)


async def test_with_an_auth_token_only_requests_twilio_signed_get_through(
    start_server: Callable[..., ServerProcess],
) -> None:
    """Signed with Twilio's own helper library, as Twilio signs its requests."""
    server = start_server(
        "--agent", "echo", "--twilio-auth-token", "tok3n",
        "--limits-trusted-proxies", "127.0.0.2/32",
    )  # fmt: skip
    validator = RequestValidator("tok3n")
    fields = {"CallSid": "CA1", "From": "+15550001111", "To": "+15550002222"}
    async with httpx.AsyncClient() as http:
        unsigned = await http.post(f"{server.url}/twilio/voice", data=fields)
        assert unsigned.status_code == 403
        signature = validator.compute_signature(f"{server.url}/twilio/voice", fields)
        forged = {**fields, "From": "+15559999999"}
        tampered = await http.post(f"{server.url}/twilio/voice", data=forged,
                                   headers={"X-Twilio-Signature": signature})  # fmt: skip
        assert tampered.status_code == 403
        good = await http.post(f"{server.url}/twilio/voice", data=fields,
                               headers={"X-Twilio-Signature": signature})  # fmt: skip
        assert good.status_code == 200 and "<Connect>" in good.text
        # Behind a TLS proxy Twilio signed the public https URL; only a trusted proxy's
        # word on what that URL was is taken.
        proxied = validator.compute_signature("https://voice.example.com/twilio/voice", fields)
        forwarded = {"X-Twilio-Signature": proxied, "X-Forwarded-Proto": "https",
                     "X-Forwarded-Host": "voice.example.com"}  # fmt: skip
        from_anyone = await http.post(f"{server.url}/twilio/voice", data=fields,
                                      headers=forwarded)  # fmt: skip
        assert from_anyone.status_code == 403
    proxy = httpx.AsyncHTTPTransport(local_address="127.0.0.2")
    async with httpx.AsyncClient(transport=proxy) as http:
        behind = await http.post(f"{server.url}/twilio/voice", data=fields, headers=forwarded)
        assert behind.status_code == 200
        assert '<Stream url="wss://voice.example.com/twilio/stream/' in behind.text
    # The stream: at the URL the webhook gave, with its one-time ticket, signed.
    twiml_url = re.search(r'<Stream url="([^"]+)"', good.text)
    assert twiml_url is not None
    ticketed = twiml_url.group(1)
    assert ticketed.startswith(stream_url(server) + "/")
    for url in (stream_url(server), ticketed):
        with pytest.raises(websockets.InvalidStatus) as refused:
            async with websockets.connect(url):
                pass
        assert refused.value.response.status_code == 403, "unsigned"
    # The bare URL's signature is the same for every call: a captured one is no key.
    bare = {"X-Twilio-Signature": validator.compute_signature(stream_url(server), {})}
    with pytest.raises(websockets.InvalidStatus) as refused:
        async with websockets.connect(stream_url(server), additional_headers=bare):
            pass
    assert refused.value.response.status_code == 403
    signed = {"X-Twilio-Signature": validator.compute_signature(ticketed, {})}
    async with websockets.connect(ticketed, additional_headers=signed) as ws:
        await Caller(ws).start()
        await until_in_use(server.url, 1)
        # The same ticket, signature and all, replayed: refused.
        with pytest.raises(websockets.InvalidStatus) as replayed:
            async with websockets.connect(ticketed, additional_headers=signed):
                pass
        assert replayed.value.response.status_code == 403


async def test_with_an_api_key_streams_need_the_key_or_a_ticket(
    start_server: Callable[..., ServerProcess],
) -> None:
    """No Twilio token, but the server has a key: the webhook needs it (as Twilio sends a
    URL's credentials, HTTP Basic), and the stream its ticket or the key itself."""
    server = start_server("--agent", "echo", "--server-api-key", "k3y")
    async with httpx.AsyncClient() as http:
        assert (await http.post(f"{server.url}/twilio/voice")).status_code == 401
        wrong = await http.post(f"{server.url}/twilio/voice", auth=("twilio", "nope"))
        assert wrong.status_code == 401 and "basic" in wrong.headers["www-authenticate"].lower()
        twiml = (await http.post(f"{server.url}/twilio/voice", auth=("twilio", "k3y"))).text
    found = re.search(r'<Stream url="([^"]+)"', twiml)
    assert found is not None
    with pytest.raises(websockets.InvalidStatus) as refused:
        async with websockets.connect(stream_url(server)):
            pass
    assert refused.value.response.status_code == 403, "no credential: refused"
    async with websockets.connect(found.group(1)) as ws:
        await Caller(ws).start()
        await until_in_use(server.url, 1, key="k3y")
    await until_in_use(server.url, 0, key="k3y")
    keyed = {"Authorization": "Bearer k3y"}  # a carrier that opens streams with the key
    async with websockets.connect(stream_url(server), additional_headers=keyed) as ws:
        await Caller(ws).start()
        await until_in_use(server.url, 1, key="k3y")


async def test_a_stream_that_sends_no_audio_is_gone_at_the_media_timeout(
    start_server: Callable[..., ServerProcess],
) -> None:
    """A carrier sends the caller's audio all the time, silence included: a stream that
    sends none held its slot until the 300 s idle timeout."""
    server = start_server("--agent", "echo", "--pool-media-timeout-s", "1")
    async with websockets.connect(stream_url(server)) as ws:
        await Caller(ws).start()
        await until_in_use(server.url, 1)
        await asyncio.wait_for(ws.wait_closed(), 15)
    await until_in_use(server.url, 0)
