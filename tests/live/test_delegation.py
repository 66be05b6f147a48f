"""Delegation in the Live dialect (engine doubles): the voice's LLM calls `delegate`, the
task goes to the client or to the Responses backend run here, and the answer is spoken.
Every event is checked against the SDK's models, the backend's nested Responses events
too (openai.types.responses)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from openai.types.responses import ResponseStreamEvent
from pydantic import TypeAdapter

from app.config import LimitsSettings
from app.config.tools import ToolsSettings
from app.live.backend import BACKEND_INSTRUCTIONS, COULD_NOT
from app.live.delegation import ACKNOWLEDGE
from app.live.session_config import Delegation, SessionConfig, to_changes
from app.tools.servers import ToolServers
from tests.live.test_dialect import LIMITS, Client
from tests.session.fakes import FakeLLM, FakeTTS, noise, silence
from tests.support.mcp_server import McpHttpServer

NESTED: TypeAdapter[ResponseStreamEvent] = TypeAdapter(ResponseStreamEvent)
WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "The weather in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
}


def delegating(
    delegation: dict[str, Any], limits: LimitsSettings = LIMITS, tools: ToolServers | None = None
) -> Client:
    config = SessionConfig.model_validate({"model": "gpt-live-1", "delegation": delegation})
    client = Client(delegation=config.delegation, limits=limits, tools=tools)
    client.session.configure(to_changes(config, (), limits))
    llm = client.engines.llm
    assert isinstance(llm, FakeLLM)
    llm.arguments = ["{", "}"]  # the delegate tool takes none
    return client


async def test_a_client_delegation_round_trip() -> None:
    client = delegating({"type": "client"})
    llm, tts = client.engines.llm, client.engines.tts
    assert isinstance(llm, FakeLLM) and isinstance(tts, FakeTTS)
    client.speak(noise(800) + silence(700))
    await client.wait_for("session.delegation.created")
    (created,) = client.of("session.delegation.created")
    delegation = created["delegation"]
    assert delegation["target"] == "client" and delegation["task"] == "question of 1000 ms"
    assert llm.tools[0][0] is not None, "the voice's LLM was offered the delegate tool"
    # At once (the default delay for client delegation), the agent says it is on it.
    await client.wait_for("session.usage.updated", count=2)
    said = [text for text, _, _ in tts.spoken]
    assert said[-1] == ACKNOWLEDGE
    # The client's answer, with the delegation's id, is spoken.
    client.send({"type": "session.commentary.append", "content": "Staging is healthy.",
                 "delegation_id": delegation["id"], "event_id": "c1"})  # fmt: skip
    await client.wait_for("session.usage.updated", count=3)
    assert tts.spoken[-1][0] == "Staging is healthy."
    # The call left the conversation; what the user heard stands for it.
    history = [(m.role, m.content) for m in client.session.history.messages()]
    assert ("assistant", "Staging is healthy.") in history
    assert not [m for m in client.session.history.messages() if m.call is not None]
    # Answered, it is closed; an id nobody gave is refused, and the session goes on.
    client.send({"type": "session.thinking.append", "content": "x",
                 "delegation_id": delegation["id"]})  # fmt: skip
    assert client.of("error")[-1]["error"]["param"] == "delegation_id"
    client.assert_sdk_parses()
    await client.session.close()


async def test_commentary_stands_in_for_a_late_acknowledgement() -> None:
    client = delegating({"type": "client", "acknowledgement_delay_ms": 400})
    tts = client.engines.tts
    assert isinstance(tts, FakeTTS)
    client.speak(noise(800) + silence(700))
    await client.wait_for("session.delegation.created")
    delegation_id = client.of("session.delegation.created")[0]["delegation"]["id"]
    client.send({"type": "session.commentary.append", "content": "Staging is healthy.",
                 "delegation_id": delegation_id})  # fmt: skip
    await client.wait_for("session.usage.updated", count=2)
    await asyncio.sleep(0.6)
    assert [text for text, _, _ in tts.spoken] == ["Staging is healthy."], "no acknowledgement"
    await client.session.close()


async def test_a_responses_delegation_with_a_client_run_tool() -> None:
    backend = {"model": "backend-model", "instructions": "You check systems.", "tools": [WEATHER]}
    client = delegating({"type": "responses", "responses": backend})
    llm, tts = client.engines.llm, client.engines.tts
    assert isinstance(llm, FakeLLM) and isinstance(tts, FakeTTS)
    client.speak(noise(800) + silence(700))
    await client.wait_for("session.delegation.created")
    delegation = client.of("session.delegation.created")[0]["delegation"]
    assert delegation["target"] == "responses" and delegation["response_id"]

    # The backend (a second call to the same LLM) calls the client's function.
    await client.wait_for("response.event", count=4)
    for _ in range(100):
        if any(e["event"]["type"] == "response.completed" for e in client.of("response.event")):
            break
        await asyncio.sleep(0.02)
    nested = [e["event"] for e in client.of("response.event")]
    for event in nested:
        NESTED.validate_python(event)
    assert {e["delegation_id"] for e in client.of("response.event")} == {delegation["id"]}
    backend_prompt = next(p for p in llm.prompts if p[0]["content"] == "You check systems.")
    assert "Task: question of 1000 ms" in backend_prompt[-1]["content"]
    (call,) = [e["item"] for e in nested if e["type"] == "response.output_item.done"]
    assert call["type"] == "function_call" and call["name"] == "get_weather"

    # The client runs it and asks the backend to go on: its answer is spoken.
    output = {"type": "function_call_output", "call_id": call["call_id"], "output": "all green"}
    client.send({"type": "response.item.create", "item": output})
    client.send({"type": "response.create"})
    for _ in range(300):
        done = [e for e in client.of("response.event") if e["event"]["type"].endswith("completed")]
        if len(done) == 2:
            break
        await asyncio.sleep(0.02)
    texts = [e["event"] for e in client.of("response.event")
             if e["event"]["type"] == "response.output_text.done"]  # fmt: skip
    assert texts and texts[0]["text"].startswith("Sure,")
    await client.wait_for("session.usage.updated", count=3)
    assert [text for text, _, _ in tts.spoken][-1] == texts[0]["text"], "the answer, spoken"
    for event in client.of("response.event"):
        NESTED.validate_python(event["event"])
    # The backend's client events need Responses delegation; this session has it.
    assert not client.of("error"), client.of("error")
    client.assert_sdk_parses()
    await client.session.close()


async def test_a_responses_delegation_runs_an_mcp_tool_itself() -> None:
    """Live's own vocabulary for MCP: an `mcp` tool among the Responses backend's tools.
    The backend calls it here, and its answer with the result is spoken."""
    server = McpHttpServer().start()
    try:
        orders = {"type": "mcp", "server_label": "orders", "server_url": server.url,
                  "allowed_tools": ["order_status"], "require_approval": "never"}  # fmt: skip
        allowed = ToolServers(ToolsSettings(mcp_allowed_urls=["http://127.0.0.1:*/mcp"]))
        client = delegating({"type": "responses", "responses": {"tools": [orders]}}, tools=allowed)
        llm, tts = client.engines.llm, client.engines.tts
        assert isinstance(llm, FakeLLM) and isinstance(tts, FakeTTS)
        llm.arguments = ['{"order": ', '"42"}']
        client.speak(noise(800) + silence(700))
        await client.wait_for("session.delegation.created")
        for _ in range(300):
            if any(e["event"]["type"] == "response.completed"
                   for e in client.of("response.event")):  # fmt: skip
                break
            await asyncio.sleep(0.02)
        nested = [e["event"] for e in client.of("response.event")]
        for event in nested:
            NESTED.validate_python(event)
        kinds = [e["type"] for e in nested]
        ran = kinds.index("response.mcp_call.in_progress")
        assert (
            ran
            < kinds.index("response.mcp_call.completed")
            < kinds.index("response.output_text.done")
        ), kinds
        done = [e for e in nested if e["type"] == "response.output_item.done"]
        assert [(e["item"]["type"], e["output_index"]) for e in done] == [
            ("mcp_list_tools", 0), ("mcp_call", 1), ("message", 2),
        ]  # fmt: skip
        listed, called, said = (e["item"] for e in done)
        assert [t["name"] for t in listed["tools"]] == ["order_status"]
        assert kinds.index("response.mcp_list_tools.completed") < ran
        assert called["output"] == "Order 42 has shipped and arrives on Tuesday."
        await client.wait_for("session.usage.updated", count=3)
        assert tts.spoken[-1][0] == said["content"][0]["text"], "the answer, spoken"
        client.assert_sdk_parses()
        await client.session.close()
    finally:
        server.stop()


@pytest.mark.parametrize("approve", [True, False])
async def test_a_backend_asks_before_a_call_and_runs_it_once_approved(approve: bool) -> None:
    server = McpHttpServer().start()
    try:
        orders = {
            "type": "mcp",
            "server_label": "orders",
            "server_url": server.url,
            "allowed_tools": ["order_status"],
        }  # approval: always, OpenAI's default
        allowed = ToolServers(ToolsSettings(mcp_allowed_urls=["http://127.0.0.1:*/mcp"]))
        client = delegating({"type": "responses", "responses": {"tools": [orders]}}, tools=allowed)
        llm, tts = client.engines.llm, client.engines.tts
        assert isinstance(llm, FakeLLM) and isinstance(tts, FakeTTS)
        llm.arguments = ['{"order": "5"}']
        client.speak(noise(800) + silence(700))
        await client.wait_for("session.delegation.created")
        await until_completed(client, 1)
        nested = [e["event"] for e in client.of("response.event")]
        (request,) = [e["item"] for e in nested if e["type"] == "response.output_item.done"
                      and e["item"]["type"] == "mcp_approval_request"]  # fmt: skip
        assert (request["name"], request["arguments"]) == ("order_status", '{"order": "5"}')
        assert "response.mcp_call.in_progress" not in [e["type"] for e in nested], "not run"
        before = server.requests

        answer = {"type": "mcp_approval_response", "approval_request_id": request["id"]}
        client.send({"type": "response.item.create", "item": {**answer, "approve": approve}})
        client.send({"type": "response.item.create", "item": {**answer, "approve": approve}})
        assert client.of("error")[-1]["error"]["param"] == "item.approval_request_id", "once"
        client.send({"type": "response.create"})
        await until_completed(client, 2)
        later = [e["event"] for e in client.of("response.event")][len(nested) :]
        calls = [e["item"] for e in later if e["type"] == "response.output_item.done"
                 and e["item"]["type"] == "mcp_call"]  # fmt: skip
        assert not [e for e in later if e["type"] == "response.mcp_list_tools.completed"]
        if approve:
            (call,) = calls
            assert call["approval_request_id"] == request["id"] and server.requests > before
            assert call["output"] == "Order 5 has shipped and arrives on Tuesday."
        else:  # not run, and the model is told so
            assert calls == [] and server.requests == before
            told = llm.prompts[-1][-1]
            assert told["role"] == "tool" and "did not approve" in told["content"], told
        await client.wait_for("session.usage.updated", count=3)
        for event in client.of("response.event"):
            NESTED.validate_python(event["event"])
        client.assert_sdk_parses()
        await client.session.close()
    finally:
        server.stop()


async def test_a_backend_mcp_url_not_allowed_is_refused_on_update() -> None:
    client = delegating({"type": "responses", "responses": {"tools": [WEATHER]}})
    server = McpHttpServer().start()  # allowed by no one: the session has no allowed URLs
    try:
        named = {"type": "mcp", "server_label": "x", "server_url": server.url,
                 "require_approval": "never"}  # fmt: skip
        client.send({"type": "session.update", "session": {"delegation": {
            "type": "responses", "responses": {"tools": [named]}}}})  # fmt: skip
        (error,) = client.of("error")
        assert error["error"]["param"] == "session.delegation.responses.tools", error
        assert server.requests == 0
    finally:
        server.stop()
    await client.session.close()


def test_delegation_config_refusals() -> None:
    for delegation, param in (
        ({"type": "decisions"}, "session.delegation.type"),
        ({"type": "responses"}, "session.delegation.responses"),
        ({"type": "responses", "responses": {"tools": [{"type": "web_search"}]}},
         "session.delegation.responses.tools[0]"),
        # An MCP server needs its label, one of its own.
        ({"type": "responses", "responses": {"tools": [
            {"type": "mcp", "name": "x", "server_url": "http://169.254.169.254/"}]}},
         "session.delegation.responses.tools[0]"),
        ({"type": "responses", "responses": {"tools": [
            {"type": "mcp", "server_label": "x", "server_url": "http://127.0.0.1:1/mcp"}] * 2}},
         "session.delegation.responses.tools"),
        ({"type": "responses", "responses": {"instructions": "x" * 65_537}},
         "session.delegation.responses.instructions"),
        ({"type": "responses", "responses": {"tools": [WEATHER] * 129}},
         "session.delegation.responses.tools"),
        ({"type": "responses", "responses": {"tools": [
            {**WEATHER, "description": "x" * 20_000}]}},
         "session.delegation.responses.tools[0]"),
    ):  # fmt: skip
        config = SessionConfig.model_validate({"model": "m", "delegation": delegation})
        try:
            to_changes(config, (), LIMITS)
        except Exception as exc:  # noqa: BLE001
            assert getattr(exc, "param", None) == param, exc
        else:
            raise AssertionError(f"{json.dumps(delegation)} was taken")
    assert Delegation(type="client").responses is None


async def until_completed(client: Client, count: int, timeout_s: float = 6.0) -> list[Any]:
    """The backend's responses once `count` of them have ended (completed or failed)."""
    for _ in range(int(timeout_s / 0.02)):
        nested = [e["event"] for e in client.of("response.event")]
        ended = [e for e in nested if e["type"] in ("response.completed", "response.failed")]
        if len(ended) >= count:
            return ended
        await asyncio.sleep(0.02)
    raise AssertionError(f"fewer than {count} responses ended: {client.of('response.event')}")


async def test_a_client_cannot_loop_the_backend_or_ask_it_for_more_tokens() -> None:
    """A client answering every function call with another request gets the session's
    rounds and no more; each asks for at most delegation_tokens."""
    limits = LimitsSettings(delegation_rounds=3, delegation_tokens=64, item_chars=100)
    backend = {"tools": [WEATHER], "max_output_tokens": 100_000}
    client = delegating({"type": "responses", "responses": backend}, limits)
    llm, tts = client.engines.llm, client.engines.tts
    assert isinstance(llm, FakeLLM) and isinstance(tts, FakeTTS)
    client.speak(noise(800) + silence(700))
    await client.wait_for("session.delegation.created")
    for round_ in range(1, 5):
        await until_completed(client, round_)
        client.send({"type": "response.item.create",
                     "item": {"type": "message", "role": "user", "content": "Again."}})  # fmt: skip
        client.send({"type": "response.create"})
    ended = await until_completed(client, 5)
    assert [e["type"] for e in ended] == ["response.completed"] * 3 + ["response.failed"] * 2
    assert "delegation_limit" in ended[-1]["response"]["error"]["message"]
    backend_asks = [n for n, p in enumerate(llm.prompts) if p[0]["content"] == BACKEND_INSTRUCTIONS]
    assert len(backend_asks) == 3, "the LLM was asked no more than the session's rounds"
    assert {llm.max_tokens[n] for n in backend_asks} == {64}
    await client.wait_for("session.usage.updated", count=3)
    assert tts.spoken[-1][0] == COULD_NOT, "the caller is told"
    # An item over item_chars is refused, not added.
    output = {"type": "function_call_output", "call_id": "c", "output": "x" * 101}
    client.send({"type": "response.item.create", "item": output})
    assert client.of("error")[-1]["error"]["param"] == "item.output"
    client.assert_sdk_parses()
    await client.session.close()


async def test_a_delegation_that_takes_too_long_fails_and_the_caller_is_told() -> None:
    limits = LimitsSettings(delegation_s=0.5)
    client = delegating({"type": "responses", "responses": {}}, limits)
    llm, tts = client.engines.llm, client.engines.tts
    assert isinstance(llm, FakeLLM) and isinstance(tts, FakeTTS)
    client.speak(noise(800) + silence(700))
    await client.wait_for("session.delegation.created")
    llm.hold_after = 2  # the backend's answer stops after two words, and never goes on
    (ended,) = await until_completed(client, 1)
    assert ended["type"] == "response.failed", ended
    assert "delegation_timeout" in ended["response"]["error"]["message"]
    assert llm.closed_early >= 1, "its LLM stream was closed"
    for _ in range(300):
        if tts.spoken and tts.spoken[-1][0] == COULD_NOT:
            break
        await asyncio.sleep(0.02)
    assert tts.spoken[-1][0] == COULD_NOT
    client.assert_sdk_parses()
    await client.session.close()
