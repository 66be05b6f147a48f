"""Echo mode over real WebRTC: the media path alone, and bad data-channel input."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from app.audio.level import rms_db
from clients import AgentClient, load_wav
from tests.support.server import ServerProcess, server_stats

pytestmark = pytest.mark.e2e


@pytest.mark.parametrize(
    "codecs",
    [(), ("audio/PCMU",)],
    ids=["opus", "pcmu-only gateway"],
)
async def test_echo_plays_the_utterance_back(
    echo_server: ServerProcess, speech: Callable[[str], Path], codecs: tuple[str, ...]
) -> None:
    before = (await server_stats(echo_server.url))["speculation"]
    client = AgentClient(echo_server.url, codecs)
    await client.connect()
    try:
        said = load_wav(str(speech("Testing the microphone, one two three.")))
        client.mic.say(said)
        done = await client.wait_for("response.done", timeout_s=30)
        assert client.mic.speech_ended_at is not None
        await client.wait_quiet(since=client.mic.speech_ended_at)
    finally:
        await client.close()
    assert done["response"]["status"] == "completed"
    assert "first_frame_sent" in done["response"]["timings_ms"]
    # The reply was begun in the pause before the turn ended, and kept: /v1/stats counts it.
    # (One may also be begun at the comma's pause, and dropped when the speech goes on.)
    after = (await server_stats(echo_server.url))["speculation"]
    assert after["kept"] - before["kept"] == 1
    assert after["started"] - before["started"] in (1, 2)
    rate = client.recording.rate
    assert rate == (8_000 if codecs else 48_000)
    echoed = client.recording.audio(since=client.mic.speech_ended_at)
    voiced = echoed[np.abs(echoed.astype(np.int32)) > 300]
    # The codec twice and two resamplings: the level survives within a few dB.
    speech_level = rms_db(said[np.abs(said.astype(np.int32)) > 300])
    assert abs(rms_db(voiced) - speech_level) < 6
    # About as long as what was said (prefix padding and VAD tail added).
    spoken_s = np.count_nonzero(np.abs(said) > 300) / 48_000
    assert 0.7 * spoken_s < len(voiced) / rate < 1.5 * spoken_s


async def test_bad_client_events_get_errors_and_the_session_survives(
    echo_server: ServerProcess, speech: Callable[[str], Path]
) -> None:
    client = AgentClient(echo_server.url)
    await client.connect()
    try:
        client.channel.send("{not json")
        client.channel.send(json.dumps({"no": "type"}))
        client.send({"type": "bogus.event"})
        await client.wait_for("error", count=3, timeout_s=10)
        codes = [event["error"]["code"] for event in client.of_type("error")]
        assert codes == ["invalid_json", "invalid_event", "unknown_event"]
        client.mic.say(load_wav(str(speech("Still there?"))))
        done = await client.wait_for("response.done", timeout_s=30)
        assert done["response"]["status"] == "completed"
    finally:
        await client.close()
