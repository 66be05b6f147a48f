"""Noisy rooms and speakerphones, over real WebRTC peers.

A question asked over pink noise is heard and answered by the real agent, and noise alone
is no turn; among other talkers, the turn ends with the caller. A speakerphone plays the
agent back into its own microphone (6 dB down, the worst echo return loss G.168 allows,
120 ms late, through a short room response): with the server cancelling that echo, the
echo agent never hears itself, yet the user still interrupts it; without, it talks to
itself. (A backchannel over the real agent's answer,
resumed with every word, is test_bargein's.)
"""

from __future__ import annotations

import contextlib
import logging
import re
import time
from collections.abc import Callable
from pathlib import Path

import av
import numpy as np
import pytest

from bench.bargein import LONG_UTTERANCE
from clients import RATE, AgentClient, Recording, WavMicrophone, load_wav
from tests.support.rooms import active_rms, babble, echo, mixed, pcm16, pink_noise
from tests.support.server import ServerProcess
from tests.support.speech import QUESTION, word_error_rate

pytestmark = pytest.mark.e2e
log = logging.getLogger(__name__)

SNR_DB = 10
LEAD_S, TAIL_S = 1.0, 1.5  # the noise before and after the question
NOISE_S = 10.0
RETURN_LOSS_DB = 6
ECHO_DELAY_MS = 120
SAID = "Please read back my account number, slowly and clearly."
INTERRUPTION = "Stop, stop, that is enough."


class Speakerphone(WavMicrophone):
    """A microphone by the loudspeaker: besides what is said into it, it hears what the
    client receives, `loss_db` quieter and `delay_ms` after it arrived, through a room
    response. (The server sends nothing between replies: each one is placed anew.)"""

    def __init__(self, heard: Recording, loss_db: float, delay_ms: int) -> None:
        super().__init__()
        self._heard = heard
        self._delay_s = delay_ms / 1000
        self._room = echo(np.eye(1, RATE // 20)[0], loss_db, 0, RATE)  # impulse response
        self._tail = np.zeros(len(self._room) - 1)
        self._line = np.zeros(0)  # the room's sound, from the frame about to be sent
        self._taken: int | None = None  # frames of `heard` played into the room so far

    async def recv(self) -> av.AudioFrame:
        frame = await super().recv()
        now = time.monotonic()
        if self._taken is None:  # the room starts now: audio received before is gone
            self._taken = len(self._heard.frames)
        fresh = self._heard.frames[self._taken :]
        if fresh:
            due = self._heard.times[self._taken] + self._delay_s  # when its first frame plays
            gap = int((due - now) * RATE) - len(self._line)
            if gap > len(frame.to_ndarray()[0]):  # a new burst: silence until it is due
                self._line = np.concatenate([self._line, np.zeros(gap)])
                self._tail[:] = 0
            played = np.concatenate([self._tail, *fresh]).astype(np.float64)
            self._tail = played[len(played) - len(self._tail) :]
            self._line = np.concatenate([self._line, np.convolve(played, self._room, "valid")])
            self._taken += len(fresh)
        mic = frame.to_ndarray()[0].astype(np.float64)
        back, self._line = self._line[: len(mic)], self._line[len(mic) :]
        mic[: len(back)] += back
        out = av.AudioFrame.from_ndarray(
            np.clip(mic, -32768, 32767).astype(np.int16).reshape(1, -1), format="s16", layout="mono"
        )
        out.sample_rate, out.pts, out.time_base = frame.sample_rate, frame.pts, frame.time_base
        return out


async def speakerphone(url: str) -> AgentClient:
    client = AgentClient(url)
    client.mic.stop()
    client.mic = Speakerphone(client.recording, RETURN_LOSS_DB, ECHO_DELAY_MS)
    client.pc.getSenders()[0].replaceTrack(client.mic)
    await client.connect()
    return client


async def count_by(client: AgentClient, kind: str, count: int, timeout_s: float) -> int:
    """How many `kind` events the client has seen once it has `count` or `timeout_s` passed."""
    with contextlib.suppress(TimeoutError):
        await client.wait_for(kind, count, timeout_s=timeout_s)
    return len(client.of_type(kind))


def timeline(client: AgentClient) -> list[str]:
    """The turn and reply events the client saw, with seconds since the session began."""
    start = client.events[0][0] if client.events else 0.0
    kinds = ("input_audio_buffer.", "response.created", "response.done", "output_audio_buffer.")
    return [
        f"{at - start:.2f} {event['type']} {event.get('response', {}).get('status', '')}".strip()
        for at, event in client.events
        if event["type"].startswith(kinds)
    ]


def statuses(client: AgentClient) -> list[str]:
    return [done["response"]["status"] for done in client.of_type("response.done")]


def as_int16(samples: np.ndarray) -> np.ndarray:
    return np.frombuffer(pcm16(samples), np.int16)


@pytest.fixture(scope="module")
def cancelling_server(start_module_server: Callable[..., ServerProcess]) -> ServerProcess:
    """The echo agent, cancelling the echo WebRTC peers send back (no echo guard)."""
    return start_module_server("--agent", "echo", "--audio-echo-cancellation", "true")


@pytest.fixture(scope="module")
def question(speech: Callable[[str], Path]) -> np.ndarray:
    """QUESTION as espeak-ng says it, in -1..1, starting at once."""
    return np.trim_zeros(load_wav(str(speech(QUESTION))), "f") / 32768


async def test_a_question_asked_over_pink_noise_is_heard_and_answered(
    agent_server: ServerProcess, question: np.ndarray
) -> None:
    lead = np.zeros(int(LEAD_S * RATE))
    spoken = np.concatenate([lead, question])
    noise = pink_noise(len(spoken) + int(TAIL_S * RATE))
    client = AgentClient(agent_server.url)
    await client.connect()
    try:
        client.mic.say(as_int16(mixed(spoken, noise, SNR_DB)))
        done = (await client.wait_for("response.done", timeout_s=180))["response"]
    finally:
        await client.close()
    heard = " ".join(
        event["transcript"]
        for event in client.of_type("conversation.item.input_audio_transcription.completed")
    )
    wer = word_error_rate(QUESTION, heard)
    log.info("heard %r at %d dB SNR: WER %.2f", heard, SNR_DB, wer)
    committed = len(client.of_type("input_audio_buffer.committed"))
    assert committed == 1, f"the question in noise was not one turn: {timeline(client)}"
    # Two words of eight (the question is heard whole here down to 0 dB SNR).
    assert wer <= 0.25, f"Whisper heard {heard!r} for {QUESTION!r} (WER {wer:.2f})"
    assert done["status"] == "completed", f"the answer did not complete: {done}"
    assert done["output"][0]["content"][0]["transcript"], f"the answer said nothing: {done}"


async def test_among_other_talkers_a_turn_ends_with_the_caller(
    agent_server: ServerProcess, question: np.ndarray
) -> None:
    """Four other voices 10 dB under the caller, talking before the question, through it
    and on after it: the turn begins on them and ends when the caller stops, not when
    they do."""
    lead, tail = int(LEAD_S * RATE), 2 * RATE
    spoken = np.concatenate([np.zeros(lead), question, np.zeros(tail)])
    room = babble(len(spoken)) * active_rms(question) / 10 ** (SNR_DB / 20)
    client = AgentClient(agent_server.url)
    await client.connect()
    try:
        client.mic.say(as_int16(spoken + room))
        stopped = await client.wait_for("input_audio_buffer.speech_stopped", timeout_s=60)
        heard = await client.wait_for(
            "conversation.item.input_audio_transcription.completed", timeout_s=60
        )
    finally:
        await client.close()
    started = client.of_type("input_audio_buffer.speech_started")[0]
    # In the stream's time: the turn began on the room, within the lead.
    question_ends_ms = (lead + len(question)) * 1000 // RATE
    turn_ms = stopped["audio_end_ms"] - started["audio_start_ms"]
    assert turn_ms <= question_ends_ms + 300, f"the room held the turn open: {timeline(client)}"
    # The room's words are heard too (what it said before the caller is in the turn), so
    # what counts is how many of the question's words came through.
    said = re.findall(r"[a-z]+", QUESTION.lower())
    got = set(re.findall(r"[a-z]+", heard["transcript"].lower()))
    found = sum(word in got for word in said)
    log.info("heard %r among other talkers: %d of %d words", heard["transcript"], found, len(said))
    assert found >= len(said) // 2, f"Whisper heard {heard['transcript']!r} for {QUESTION!r}"


async def test_pink_noise_alone_is_no_turn(
    agent_server: ServerProcess, question: np.ndarray
) -> None:
    """(Babble is not tested: at this level, or 20 dB below a voice, the voice detector
    hears other people talking as a turn, and Whisper often finds words in it.)"""
    # As loud as under the question above: 10 dB below a speaking voice.
    noise = pink_noise(int(NOISE_S * RATE)) * active_rms(question) / 10 ** (SNR_DB / 20)
    client = AgentClient(agent_server.url)
    await client.connect()
    try:
        client.mic.say(as_int16(noise))
        # Through the noise, and 2 s more for a turn the noise began to end.
        created = await count_by(client, "response.created", 1, timeout_s=NOISE_S + 2)
    finally:
        await client.close()
    started = len(client.of_type("input_audio_buffer.speech_started"))
    committed = len(client.of_type("input_audio_buffer.committed"))
    log.info("pink noise alone: %d speech_started, %d committed", started, committed)
    assert committed == 0, f"{NOISE_S:.0f} s of pink noise made turns: {timeline(client)}"
    assert created == 0, f"the agent answered pink noise: {timeline(client)}"


async def test_a_speakerphones_echo_is_no_turn_but_the_user_still_interrupts(
    cancelling_server: ServerProcess, speech: Callable[[str], Path]
) -> None:
    client = await speakerphone(cancelling_server.url)
    try:
        client.mic.say(load_wav(str(speech(SAID))))
        await client.wait_for("response.done", timeout_s=30)
        await client.wait_quiet(since=client.event_time("response.created"), timeout_s=30)
        # The echo has left the room; a turn it began would end within 2 s.
        committed = await count_by(client, "input_audio_buffer.committed", 2, timeout_s=2)
        started = len(client.of_type("input_audio_buffer.speech_started"))
        echoed = statuses(client)
        seen = timeline(client)
        assert committed == 1, f"the agent's echo became {committed - 1} turn(s): {seen}"
        assert started == 1, f"the echo seemed to start {started - 1} turn(s): {seen}"
        assert echoed == ["completed"], f"the echo cut into the reply: {seen}"
        # Now the user talks over the next reply, at a speaking voice's level.
        client.mic.say(load_wav(str(speech(LONG_UTTERANCE))))
        await client.wait_for("response.created", count=2, timeout_s=60)
        await client.wait_for("output_audio_buffer.started", count=2, timeout_s=30)
        assert statuses(client) == ["completed"], f"the echo cut in: {timeline(client)}"
        client.mic.say(np.trim_zeros(load_wav(str(speech(INTERRUPTION))), "f"))
        await client.wait_for("response.done", count=2, timeout_s=60)
    finally:
        await client.close()
    second = client.of_type("response.done")[1]["response"]
    assert second["status"] == "cancelled", f"talking over it did not stop it: {timeline(client)}"


async def test_without_cancellation_the_same_echo_talks_to_itself(
    echo_server: ServerProcess, speech: Callable[[str], Path]
) -> None:
    """The checks above could not pass by luck: with neither the canceller nor the echo
    guard (echo_server's defaults for WebRTC), the same loop makes the echo a turn."""
    client = await speakerphone(echo_server.url)
    try:
        client.mic.say(load_wav(str(speech(SAID))))
        committed = await count_by(client, "input_audio_buffer.committed", 2, timeout_s=30)
    finally:
        await client.close()
    assert committed >= 2, f"with no canceller the echo was no turn: is the loop open? {committed}"
