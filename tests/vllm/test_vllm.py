"""The agent against a real vLLM: vLLM's CPU build from PyPI, serving Qwen2.5-Coder-1.5B-Instruct
prepared from the GGUF in its PyPI parts (deploy/vllm), the embedded default's model. Every
check reads vLLM's own /metrics, so an answer that did not come from vLLM fails them."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import websockets

from app.audio.level import rms_db
from app.config import LlmSettings
from app.engines.llm import OpenAICompatLLM
from app.vocab.chat import ChatMessage, TokenCount
from bench.answers import LIGHTS as CHAT_LIGHTS
from clients import AgentClient, load_wav
from tests.support.realtime import create_user_text
from tests.support.server import ServerProcess
from tests.support.speech import QUESTION, transcribe, words
from tests.support.vllm import SERVED_NAME, VllmServer
from tests.vllm.conftest import EVIDENCE

pytestmark = [pytest.mark.vllm, pytest.mark.e2e]

FINISHED = "vllm:request_success_total"
LONG = "Count from one to five hundred, writing every number in words."


def finished(vllm: VllmServer, reason: str) -> float:
    return vllm.metric(FINISHED, finished_reason=reason, model_name=SERVED_NAME)


def engine_steps(vllm: VllmServer) -> float:
    """Steps vLLM's engine has run (each one observes its token count once)."""
    return vllm.metric("vllm:iteration_tokens_total_count", model_name=SERVED_NAME)


def generated(vllm: VllmServer) -> float:
    return vllm.metric("vllm:generation_tokens_total", model_name=SERVED_NAME)


def served(vllm: VllmServer) -> float:
    """Requests vLLM has finished, for any reason."""
    return vllm.metric(FINISHED, model_name=SERVED_NAME)


class TextSession:
    """A Realtime WebSocket session with written replies: the LLM path without audio."""

    def __init__(self, ws: websockets.ClientConnection) -> None:
        self.ws = ws
        self.errors: list[dict[str, Any]] = []

    async def send(self, event: dict[str, Any]) -> None:
        await self.ws.send(json.dumps(event))

    async def until(self, kind: str, timeout_s: float = 120) -> dict[str, Any]:
        async with asyncio.timeout(timeout_s):
            while True:
                event = json.loads(await self.ws.recv())
                if event["type"] == "error":
                    self.errors.append(event["error"])
                if event["type"] == kind:
                    return event

    async def ask(self, text: str) -> dict[str, Any]:
        """One typed turn; the reply's `response` object."""
        await self.send(create_user_text(text))
        await self.send({"type": "response.create"})
        return (await self.until("response.done"))["response"]


@asynccontextmanager
async def text_session(
    agent: ServerProcess, max_output_tokens: int | str = "inf"
) -> AsyncIterator[TextSession]:
    async with websockets.connect(f"ws://127.0.0.1:{agent.port}/v1/realtime") as ws:
        session = TextSession(ws)
        await session.until("session.created")
        await session.send(
            {"type": "session.update",
             "session": {"type": "realtime", "output_modalities": ["text"],
                         "audio": {"input": {"turn_detection": None}},
                         "max_output_tokens": max_output_tokens}}
        )  # fmt: skip
        await session.until("session.updated")
        yield session


def reply_text(response: dict[str, Any]) -> str:
    return "".join(
        part.get("text", "") for item in response["output"] for part in item.get("content", [])
    )


async def until_idle(vllm: VllmServer) -> None:
    """vLLM with no request running: one an earlier test left (cancelled, or a reply cut)
    may still be finishing on a busy machine, and would be counted as this one's."""
    for _ in range(600):
        if vllm.metric("vllm:num_requests_running") == 0:
            return
        await asyncio.sleep(0.1)
    raise AssertionError("vLLM never went idle")


async def test_the_llm_client_streams_from_vllm(vllm: VllmServer) -> None:
    await until_idle(vllm)
    before = finished(vllm, "stop") + finished(vllm, "length")
    # A busy machine's vLLM may take its time: this test is of what streams, not how fast.
    patient = {"timeout_s": 120.0, "first_token_timeout_s": 120.0, "stall_timeout_s": 60.0}
    settings = LlmSettings(base_url=vllm.url, max_tokens=32, temperature=0, **patient)
    llm = OpenAICompatLLM(settings)
    try:
        await llm.start()
        question: list[ChatMessage] = [
            {"role": "user", "content": "What is the capital of France?"}
        ]
        tokens = TokenCount()
        deltas = [delta async for delta in llm.stream(question, tokens=tokens)]
    finally:
        await llm.aclose()
    assert llm.model_name == SERVED_NAME, "found by asking vLLM's /v1/models"
    # vLLM's own count, from the usage its last chunk carries (stream_options).
    assert tokens.prompt > 5 and 1 <= tokens.completion <= 32, tokens
    assert len(deltas) > 1, "the reply arrives as a stream of deltas"
    text = "".join(deltas)
    assert len(text.split()) >= 3
    for _ in range(100):  # vLLM counts a request in /metrics a moment after it streamed
        if finished(vllm, "stop") + finished(vllm, "length") > before:
            break
        await asyncio.sleep(0.1)
    assert finished(vllm, "stop") + finished(vllm, "length") == before + 1
    EVIDENCE.append(
        f"streamed by vLLM in {len(deltas)} deltas ({tokens.prompt} tokens in, "
        f"{tokens.completion} out): {text!r}"
    )


# The Realtime form of a tool is the chat form's function, with its type beside it.
LIGHTS = {"type": "function", **CHAT_LIGHTS["function"]}


async def test_a_session_with_tools_gets_the_call_vllm_passed_on_as_text(
    vllm_agent: ServerProcess, vllm: VllmServer
) -> None:
    # The agent offers the session's tools on every turn, and a vLLM started without tool
    # calling answers each such request 400 ("auto" tool choice requires ...). Qwen2.5-Coder
    # writes its call as bare JSON, which vLLM's hermes parser passes on as text.
    await until_idle(vllm)
    before = served(vllm)
    async with text_session(vllm_agent) as session:
        await session.send({"type": "session.update", "session": {"type": "realtime",
                            "tools": [LIGHTS], "tool_choice": "auto"}})  # fmt: skip
        await session.until("session.updated")
        done = await session.ask(QUESTION)
    assert session.errors == []
    assert done["status"] == "completed", done
    call = done["output"][0]
    assert call["type"] == "function_call" and call["name"] == "set_lights", done
    assert json.loads(call["arguments"])["room"].lower() == "kitchen", call
    for _ in range(100):  # vLLM counts a request in /metrics a moment after it streamed
        if served(vllm) > before:
            break
        await asyncio.sleep(0.1)
    assert served(vllm) > before, "vLLM answered the request that offered the tool"
    EVIDENCE.append(f"a session offering set_lights: vLLM wrote the call {call['arguments']}")


async def test_cancelling_a_reply_aborts_its_request_in_vllm(
    vllm_agent: ServerProcess, vllm: VllmServer
) -> None:
    # vLLM's /metrics does not count a request its client dropped, but its log names it by
    # the X-Request-Id that the agent logs beside the reply's id.
    async with text_session(vllm_agent) as session:
        await session.send(create_user_text(LONG))
        await session.send({"type": "response.create"})
        await session.until("response.output_text.delta")
        await session.send({"type": "response.cancel"})
        done = (await session.until("response.done"))["response"]
    assert done["status"] == "cancelled"
    agent_log = vllm_agent.log_path.read_text()
    found = re.search(rf"LLM request (\S+) answers {done['id']}", agent_log)
    assert found, "the agent logs which LLM request a reply made"
    aborted = f"Request chatcmpl-{found[1]} aborted."
    for _ in range(300):  # vLLM logs it once the agent has closed the stream
        if aborted in vllm.log():
            break
        await asyncio.sleep(0.1)
    assert aborted in vllm.log()
    EVIDENCE.append(f"response.cancel of {done['id']} -> vLLM's log: {aborted!r}")


async def test_sessions_asking_at_once_are_batched_by_vllm(
    vllm_agent: ServerProcess, vllm: VllmServer
) -> None:
    sessions = 4
    before = served(vllm)
    async with (
        text_session(vllm_agent, 64) as a,
        text_session(vllm_agent, 64) as b,
        text_session(vllm_agent, 64) as c,
        text_session(vllm_agent, 64) as d,
    ):
        steps_before, tokens_before = engine_steps(vllm), generated(vllm)
        replies = await asyncio.gather(*(s.ask(LONG) for s in (a, b, c, d)))
        steps, tokens = engine_steps(vllm) - steps_before, generated(vllm) - tokens_before
    assert [r["status"] for r in replies] == ["completed"] * sessions
    assert all(words(reply_text(r)) for r in replies)
    assert served(vllm) == before + sessions
    # A step gives each request in it at most one token, so one request at a time needs a step
    # per token: fewer steps than tokens means vLLM decoded requests side by side. (vLLM counts
    # a step before it yields to /metrics, so the last one is in.)
    assert steps < tokens, f"vLLM made {tokens:.0f} tokens in {steps:.0f} steps: one at a time"
    EVIDENCE.append(f"{sessions} sessions at once: {tokens:.0f} tokens in {steps:.0f} vLLM steps")


async def test_a_spoken_conversation_over_webrtc_with_vllm(
    vllm_agent: ServerProcess, vllm: VllmServer, speech: Callable[[str], Path], whisper
) -> None:  # type: ignore[no-untyped-def]
    before = served(vllm)
    client = AgentClient(vllm_agent.url)
    await client.connect()
    try:
        client.mic.say(load_wav(str(speech(QUESTION))))
        done = await client.wait_for("response.done", timeout_s=120)
        assert client.mic.speech_ended_at is not None
        await client.wait_quiet(since=client.mic.speech_ended_at, timeout_s=60)
    finally:
        await client.close()
    assert done["response"]["status"] == "completed"
    assert served(vllm) >= before + 1, "vLLM wrote the answer"
    said = client.of_type("response.output_audio_transcript.done")[0]["transcript"]
    reply = client.recording.audio(since=client.mic.speech_ended_at)
    assert rms_db(reply) > -50, "reply audio is not silent"
    heard = transcribe(whisper, reply)
    assert words(heard), "Whisper hears words in the reply audio"
    EVIDENCE.append(f"WebRTC turn: vLLM wrote {said!r}; the peer heard {heard!r}")


async def test_vllm_down_and_restarting_gives_an_error_event_and_the_session_goes_on(
    vllm_agent: ServerProcess, vllm: VllmServer
) -> None:
    async with text_session(vllm_agent, 24) as session:
        first = await session.ask("Say hello.")
        assert first["status"] == "completed"
        vllm.stop()
        down = await session.ask("Say hello again.")
        assert down["status"] == "failed"
        assert session.errors and session.errors[-1]["code"] == "llm_unavailable"
        assert "unreachable" in session.errors[-1]["message"]
        await asyncio.to_thread(vllm.start)
        again = await session.ask("Say hello once more.")
    assert again["status"] == "completed" and words(reply_text(again))
    assert len(session.errors) == 1
    EVIDENCE.append(
        f"vLLM stopped: error {session.errors[0]['code']!r}; restarted in {vllm.startup_s:.0f} s, "
        f"and the same session's next turn was answered: {reply_text(again)!r}"
    )
