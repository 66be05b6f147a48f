"""A headless aiortc client for the agent server: plays a WAV as its microphone,
records the agent's voice, and collects the data-channel events.

The tests and bench/ use it; it is also a quick check of a deployment:
`python -m clients http://host:8000 question.wav`.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import av
import httpx
import numpy as np
from aiortc import RTCConfiguration, RTCPeerConnection, RTCRtpSender, RTCSessionDescription
from aiortc.mediastreams import MediaStreamError, MediaStreamTrack

from app.rtc.patches import release_audio_promptly
from clients.wav import RATE

FRAME = RATE // 50  # 20 ms
# Reply audio louder than this counts as the agent speaking (s16 peak).
VOICE_PEAK = 300


class Refused(RuntimeError):
    """The server refused the offer; `status` is its HTTP status (503: the pool is full)."""

    def __init__(self, status: int, body: str) -> None:
        super().__init__(f"offer refused: {status} {body}")
        self.status = status


class WavMicrophone(MediaStreamTrack):
    """Real-time paced playback of queued utterances, silence in between."""

    kind = "audio"

    def __init__(self) -> None:
        super().__init__()
        self._queue: list[np.ndarray] = []
        self._current = np.zeros(0, dtype=np.int16)
        self._offset = 0
        self._pts = 0
        self._t0: float | None = None
        self.speech_started_at: float | None = None  # wall time the first voiced frame went out
        self.speech_ended_at: float | None = None  # wall time the last voiced frame went out
        self._first_voiced_sample = -1
        self._last_voiced_sample = -1
        self._quiet = asyncio.Event()  # set once all it was given has been sent
        self._quiet.set()

    def say(self, samples: np.ndarray) -> None:
        self._queue.append(samples)
        self._quiet.clear()

    async def said(self) -> float:
        """Once all it was given has gone out: when its last voiced frame did."""
        await self._quiet.wait()
        assert self.speech_ended_at is not None, "it was given no speech"
        return self.speech_ended_at

    @property
    def busy(self) -> bool:
        return bool(self._queue) or self._offset < len(self._current)

    async def recv(self) -> av.AudioFrame:
        if self.readyState != "live":
            raise MediaStreamError
        if self._t0 is None:
            self._t0 = time.monotonic()
        else:
            self._pts += FRAME
            await asyncio.sleep(max(0.0, self._t0 + self._pts / RATE - time.monotonic()))
        if self._offset >= len(self._current) and self._queue:
            self._current = self._queue.pop(0)
            self._offset = 0
            voiced = np.nonzero(np.abs(self._current.astype(np.int32)) > VOICE_PEAK)[0]
            self._first_voiced_sample = int(voiced[0]) if len(voiced) else -1
            self._last_voiced_sample = int(voiced[-1]) if len(voiced) else -1
        chunk = self._current[self._offset : self._offset + FRAME]
        if self._offset <= self._first_voiced_sample < self._offset + FRAME:
            self.speech_started_at = time.monotonic()
        if self._offset <= self._last_voiced_sample < self._offset + FRAME:
            self.speech_ended_at = time.monotonic()
        self._offset += len(chunk)
        if self._offset >= len(self._current) and not self._queue:
            self._quiet.set()
        pcm = np.zeros(FRAME, dtype=np.int16)
        pcm[: len(chunk)] = chunk
        frame = av.AudioFrame.from_ndarray(pcm.reshape(1, -1), format="s16", layout="mono")
        frame.sample_rate = RATE
        frame.pts = self._pts
        frame.time_base = Fraction(1, RATE)
        return frame


@dataclass
class Recording:
    """Reply audio as received (mono int16 at `rate`), with arrival times per frame."""

    rate: int = RATE
    frames: list[np.ndarray] = field(default_factory=list)
    times: list[float] = field(default_factory=list)

    def audio(self, since: float = 0.0) -> np.ndarray:
        chosen = [f for f, t in zip(self.frames, self.times, strict=True) if t >= since]
        return np.concatenate(chosen) if chosen else np.zeros(0, dtype=np.int16)

    def last_voice_at(self) -> float | None:
        for samples, at in zip(reversed(self.frames), reversed(self.times), strict=True):
            if int(np.abs(samples.astype(np.int32)).max(initial=0)) > VOICE_PEAK:
                return at
        return None

    def voice_times(self, since: float, until: float) -> list[float]:
        """Arrival times of non-silent frames in [since, until)."""
        return [
            at
            for samples, at in zip(self.frames, self.times, strict=True)
            if since <= at < until
            and int(np.abs(samples.astype(np.int32)).max(initial=0)) > VOICE_PEAK
        ]

    def first_voice_after(self, since: float) -> float | None:
        for samples, at in zip(self.frames, self.times, strict=True):
            if at >= since and int(np.abs(samples.astype(np.int32)).max(initial=0)) > VOICE_PEAK:
                return at
        return None


class AgentClient:
    def __init__(self, base_url: str, codecs: tuple[str, ...] = ()) -> None:
        """`codecs` (mime types such as "audio/PCMU") restricts what the offer lists."""
        self.base_url = base_url.rstrip("/")
        self.pc = RTCPeerConnection(RTCConfiguration(iceServers=[]))
        self.mic = WavMicrophone()
        self.recording = Recording()
        self.events: list[tuple[float, dict[str, Any]]] = []
        self.session_id: str | None = None
        self._new_event = asyncio.Event()
        self._reader: asyncio.Task[None] | None = None
        self.pc.addTrack(self.mic)
        if codecs:
            wanted = {codec.lower() for codec in codecs}
            capabilities = RTCRtpSender.getCapabilities("audio").codecs
            self.pc.getTransceivers()[0].setCodecPreferences(
                [c for c in capabilities if c.mimeType.lower() in wanted]
            )
        self.channel = self.pc.createDataChannel("oai-events")
        self.channel.on("message", self._on_message)
        self.pc.on("track", self._on_track)

    async def offer(self) -> str:
        """Our SDP offer, with every ICE candidate in it."""
        await self.pc.setLocalDescription(await self.pc.createOffer())
        return str(self.pc.localDescription.sdp)

    async def accept(self, answer: dict[str, Any]) -> None:
        """Apply the server's /offer answer body."""
        self.session_id = answer["session_id"]
        await self.pc.setRemoteDescription(RTCSessionDescription(sdp=answer["sdp"], type="answer"))

    async def connect(self, timeout_s: float = 20.0) -> None:
        sdp = await self.offer()
        async with httpx.AsyncClient(timeout=timeout_s) as http:
            response = await http.post(f"{self.base_url}/offer", json={"sdp": sdp, "type": "offer"})
        if response.status_code != 200:
            raise Refused(response.status_code, response.text)
        await self.accept(response.json())
        await self.wait_for("session.created", timeout_s=timeout_s)

    def _on_track(self, track: MediaStreamTrack) -> None:
        # Timestamps of reply audio should be its arrival, not arrival plus a cushion.
        release_audio_promptly(self.pc, track)
        self._reader = asyncio.ensure_future(self._record(track))

    async def _record(self, track: MediaStreamTrack) -> None:
        while True:
            try:
                frame = await track.recv()
            except MediaStreamError:
                return
            if not isinstance(frame, av.AudioFrame):
                continue
            samples = frame.to_ndarray().reshape(-1, len(frame.layout.channels))[:, 0]
            self.recording.rate = frame.sample_rate
            self.recording.frames.append(samples.astype(np.int16))
            self.recording.times.append(time.monotonic())

    def _on_message(self, message: str | bytes) -> None:
        self.events.append((time.monotonic(), json.loads(message)))
        self._new_event.set()

    def of_type(self, kind: str) -> list[dict[str, Any]]:
        return [event for _, event in self.events if event["type"] == kind]

    async def wait_for(self, kind: str, count: int = 1, timeout_s: float = 60.0) -> dict[str, Any]:
        what = f"{kind} #{count}"
        await self.wait_until(lambda: len(self.of_type(kind)) >= count, what, timeout_s)
        return self.of_type(kind)[count - 1]

    async def wait_until(
        self, happened: Callable[[], bool], what: str, timeout_s: float = 60.0
    ) -> None:
        """Until `happened()` is true, asked again at each event."""
        deadline = time.monotonic() + timeout_s
        while not happened():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                seen = [event["type"] for _, event in self.events]
                raise TimeoutError(f"no {what} within {timeout_s}s; saw {seen}")
            self._new_event.clear()
            try:
                await asyncio.wait_for(self._new_event.wait(), remaining)
            except TimeoutError:
                continue

    def answered_since(self, at: float) -> bool:
        """A response was created after `at` (on time.monotonic's clock), and every response
        created is done: the answer to what was said by then has been given."""
        created = [e["response"]["id"] for t, e in self.events if e["type"] == "response.created"]
        later = any(t > at for t, e in self.events if e["type"] == "response.created")
        done = {e["response"]["id"] for e in self.of_type("response.done")}
        return later and set(created) <= done

    def event_time(self, kind: str, count: int = 1) -> float:
        times = [at for at, event in self.events if event["type"] == kind]
        return times[count - 1]

    async def wait_quiet(self, since: float, quiet_s: float = 1.0, timeout_s: float = 60.0) -> None:
        """Wait until the agent has spoken after `since` and then been quiet for `quiet_s`."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            first = self.recording.first_voice_after(since)
            last = self.recording.last_voice_at()
            if first is not None and last is not None and time.monotonic() - last >= quiet_s:
                return
            await asyncio.sleep(0.1)
        raise TimeoutError(f"the agent did not finish speaking within {timeout_s}s")

    def send(self, event: dict[str, Any]) -> None:
        self.channel.send(json.dumps(event))

    async def close(self) -> None:
        self.mic.stop()
        await self.pc.close()
        if self._reader is not None:
            await asyncio.wait([self._reader], timeout=2)
