"""semantic_vad over real WebRTC: the real Smart Turn model keeps a hesitation in one
turn, where server_vad's silence window cuts it in two."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from clients import AgentClient, load_wav
from tests.support.server import ServerProcess

pytestmark = pytest.mark.e2e

PAUSE_S = 0.8  # past server_vad's 500 ms window, well short of semantic_vad's 4 s


def hesitant(speech: Callable[[str], Path]) -> np.ndarray:
    """'I want to ... order a pizza.' with a pause in the middle, as 48 kHz samples."""
    before = load_wav(str(speech("I want to")))
    after = load_wav(str(speech("order a pizza.")))
    return np.concatenate([before, np.zeros(int(48_000 * PAUSE_S), np.int16), after[48_000:]])


@pytest.mark.parametrize(("detection", "turns"), [("semantic_vad", 1), ("server_vad", 2)])
async def test_a_hesitation_is_one_turn_with_the_turn_model(
    echo_server: ServerProcess, speech: Callable[[str], Path], detection: str, turns: int
) -> None:
    client = AgentClient(echo_server.url)
    await client.connect()
    try:
        audio_in = {"input": {"turn_detection": {"type": detection}}}
        client.send({"type": "session.update", "session": {"audio": audio_in}})
        updated = await client.wait_for("session.updated", timeout_s=10)
        assert updated["session"]["audio"]["input"]["turn_detection"]["type"] == detection
        client.mic.say(hesitant(speech))
        await client.wait_for("input_audio_buffer.speech_stopped", count=turns, timeout_s=30)
        await client.wait_for("response.done", count=turns, timeout_s=30)
        # Long enough after the last word for any later turn end to have come.
        assert client.mic.speech_ended_at is not None
        await asyncio.sleep(max(0.0, client.mic.speech_ended_at + 2.0 - time.monotonic()))
    finally:
        await client.close()
    assert len(client.of_type("input_audio_buffer.speech_stopped")) == turns
    assert not client.of_type("error")
