"""A phone line without echo cancellation: the agent's voice comes back into the caller's
microphone 6 dB down (G.168's worst echo return loss; lines are usually 15-20) and 100 ms
late. The server cancels that echo (phone calls' default), which must keep it from
becoming a turn, a barge-in or a speech_started, with the echo guard on too (phone calls'
default) or not, while the caller speaking over the agent still interrupts it. The guard
alone does not hold at 6 dB: the echo is louder than its margin. The echo agent makes
the failure loud: a heard echo is played back, and its echo again."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from tests.support.rtp_phone import PhoneCall
from tests.support.server import ServerProcess, free_udp_port
from tests.support.speech import telephone_pcm

pytestmark = pytest.mark.e2e

RETURN_LOSS_DB = 6


@pytest.fixture
async def call_with_echo(
    start_server: Callable[..., ServerProcess],
) -> AsyncIterator[Callable[..., Any]]:
    opened: list[PhoneCall] = []

    async def open_call(*flags: str) -> PhoneCall:
        server = start_server("--agent", "echo", "--sip-port", str(free_udp_port()), *flags)
        opened.append(call := await PhoneCall.open(server, RETURN_LOSS_DB))
        return call

    yield open_call
    for call in opened:
        await call.close()


@pytest.mark.parametrize(
    "flags",
    [(), ("--vad-echo-guard-phones", "false")],
    ids=["cancelled-and-guarded", "cancelled"],
)
async def test_the_agents_echo_is_not_a_turn_but_the_caller_still_interrupts(
    call_with_echo: Callable[..., Any], speech: Callable[[str], Path], flags: tuple[str, ...]
) -> None:
    call: PhoneCall = await call_with_echo(*flags)
    call.phone.say(telephone_pcm(speech("Please read back my account number, slowly and clearly.")))
    await call.until("response.done")
    await asyncio.sleep(4)  # the reply's echo has come and gone
    assert call.count("input_audio_buffer.committed") == 1, "the echo never became a turn"
    assert call.count("input_audio_buffer.speech_started") == 1, "nor seemed to start one"
    assert call.count("response.done") == 1
    # Now the caller talks over the next reply, at a caller's level: that interrupts.
    call.phone.say(
        telephone_pcm(speech("I would like to hear the whole statement for last month."))
    )
    await call.until("output_audio_buffer.started", count=2)
    await asyncio.sleep(0.5)
    call.phone.say(telephone_pcm(speech("Stop, stop, that is enough.")))
    await call.until("response.done", count=2)
    done = [e["response"] for e in call.events if e["type"] == "response.done"]
    assert done[1]["status"] == "cancelled", done[1]


async def test_without_the_guard_the_same_echo_talks_to_itself(
    call_with_echo: Callable[..., Any], speech: Callable[[str], Path]
) -> None:
    """The checks above could not pass by luck: with neither the canceller nor the guard,
    the echo is a turn."""
    call: PhoneCall = await call_with_echo(
        "--vad-echo-guard-phones", "false", "--audio-echo-cancellation-phones", "false"
    )
    call.phone.say(telephone_pcm(speech("Please read back my account number, slowly and clearly.")))
    await call.until("input_audio_buffer.committed", count=2, timeout_s=30)
