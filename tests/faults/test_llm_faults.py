"""The real agent (Whisper, Kokoro) against an OpenAI-compatible LLM that misbehaves on
purpose: every fault gets an error event with its own code, a failed reply, the spoken
fallback where nothing was heard, history that says what was heard, and a next turn
that works."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
import websockets

from app.config import TtsSettings
from tests.support.faulty_llm import FaultyLLM
from tests.support.metrics import scrape
from tests.support.server import ServerProcess

pytestmark = pytest.mark.e2e

FALLBACK = TtsSettings().fallback_speech
FAULTS = {
    "error500": "llm_unavailable",
    "stall_first": "llm_timeout",
    "stall_mid": "llm_timeout",
    "cut": "llm_stream_broken",
    "malformed": "llm_stream_broken",
}


@pytest.fixture(scope="module")
def faulty() -> Iterator[FaultyLLM]:
    llm = FaultyLLM()
    yield llm
    llm.close()


@pytest.fixture(scope="module")
def server(start_module_server: Callable[..., ServerProcess], faulty: FaultyLLM) -> ServerProcess:
    return start_module_server(
        "--llm-base-url", faulty.url, "--llm-model", "faulty",
        "--llm-first-token-timeout-s", "2", "--llm-stall-timeout-s", "2",
    )  # fmt: skip


async def ask(ws: Any, text: str) -> list[dict[str, Any]]:
    """A typed question and a spoken reply: every event up to its response.done."""
    item = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}
    await ws.send(json.dumps({"type": "conversation.item.create", "item": item}))
    await ws.send(json.dumps({"type": "response.create"}))
    seen = []
    while not seen or seen[-1]["type"] != "response.done":
        seen.append(json.loads(await ws.recv()))
    return seen


def of(seen: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [event for event in seen if event["type"] == kind]


async def test_each_llm_fault_is_told_and_survived(
    server: ServerProcess, faulty: FaultyLLM
) -> None:
    url = server.url.replace("http://", "ws://") + "/v1/realtime"
    async with websockets.connect(url, max_size=None) as ws:
        assert json.loads(await ws.recv())["type"] == "session.created"
        for turn, (fault, code) in enumerate(FAULTS.items()):
            faulty.faults.append(fault)
            seen = await ask(ws, f"Question {turn}: what is the capital of France?")
            errors = of(seen, "error")
            assert [e["error"]["code"] for e in errors] == [code], (fault, errors)
            done = seen[-1]["response"]
            assert done["status"] == "failed", fault
            # Nothing of the reply was heard: the fallback was, in words and in audio.
            said = of(seen, "response.output_audio_transcript.done")
            assert [event["transcript"] for event in said] == [FALLBACK], fault
            assert of(seen, "response.output_audio.delta"), fault

        # Five failures in a row: the LLM is marked failing, new calls are still let in.
        async with httpx.AsyncClient(base_url=server.url, timeout=10) as http:
            health = await http.get("/healthz")
            assert health.status_code == 503 and health.json()["status"] == "degraded"
            engines = health.json()["engines"]
            assert engines["llm"]["ok"] is False and engines["llm"]["failures_in_a_row"] == 5
            assert engines["tts"]["ok"] is True  # the fallback was spoken
            assert (await http.get("/readyz")).status_code == 200
            metrics = await scrape(server.url)
            assert metrics[("voice_agent_engine_healthy", (("engine", "llm"),))] == 0

        seen = await ask(ws, "And now?")
        assert seen[-1]["response"]["status"] == "completed" and not of(seen, "error")
        # One that works, and it is well again.
        async with httpx.AsyncClient(base_url=server.url, timeout=10) as http:
            assert (await http.get("/healthz")).json()["status"] == "ok"
        metrics = await scrape(server.url)
        assert metrics[("voice_agent_engine_healthy", (("engine", "llm"),))] == 1
        assert metrics[("voice_agent_engine_failures_total", (("engine", "llm"),))] == 5
        said = of(seen, "response.output_audio_transcript.done")
        assert said[0]["transcript"] == "Paris is the capital of France."

    # What the LLM was shown last: each question once, and after each failed one what
    # the user heard (the fallback), in order.
    last = faulty.requests[-1]
    turns = [(m["role"], m["content"]) for m in last if m["role"] != "system"]
    expected = []
    for turn in range(len(FAULTS)):
        expected += [("user", f"Question {turn}: what is the capital of France?"),
                     ("assistant", FALLBACK)]  # fmt: skip
    assert turns == [*expected, ("user", "And now?")]
