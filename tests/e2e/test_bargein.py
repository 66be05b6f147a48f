"""Talking over the real agent, over real WebRTC, measured at the client."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from bench.bargein import INTERRUPTION, LONG_QUESTION, barge_in, confirm_window_ms
from clients import load_wav
from tests.support.server import ServerProcess
from tests.support.speech import word_error_rate

pytestmark = pytest.mark.e2e

# The bound: the confirm window plus 100 ms for the trip both ways.
SLACK_S = 0.1


async def test_speaking_over_a_long_answer_stops_it_and_gets_a_new_one(
    agent_server: ServerProcess, speech: Callable[[str], Path]
) -> None:
    question = load_wav(str(speech(LONG_QUESTION)))
    interruption = load_wav(str(speech(INTERRUPTION)))
    trial = await barge_in(agent_server.url, question, interruption, after_s=1.5)

    assert trial.first_status == "cancelled", "the answer was still playing when interrupted"
    assert trial.first["status_details"]["reason"] == "turn_detected"
    assert trial.first["output"][0]["status"] == "incomplete"
    assert trial.reaction_s is not None, "reply audio was playing when the user spoke"
    window_s = confirm_window_ms(agent_server.url) / 1000
    assert trial.reaction_s <= window_s + SLACK_S, f"reply audio went on {trial.reaction_s:.3f} s"
    # The interruption was heard as a turn of its own and answered.
    assert word_error_rate(INTERRUPTION, trial.interruption_heard) <= 0.5
    assert trial.second["status"] == "completed"
    assert trial.second["output"][0]["content"][0]["transcript"]
