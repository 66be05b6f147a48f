"""The official @openai/agents-realtime in real Chromium, with its default session options,
against the embedded agent: over WebRTC (the fake microphone asks a question), with a
tool the page runs, and over its WebSocket transport.

The SDK is bundled from the npm registry by `make test` (test-output/agents-sdk) and
served at the agent's own origin, as a deployment serving its page would.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.browser import chromium
from tests.support.server import REPO, ServerProcess
from tests.support.speech import QUESTION, word_error_rate

pytestmark = pytest.mark.e2e

BUNDLE = REPO / "test-output" / "agents-sdk" / "agents.js"
PAGE = "/agents-sdk/index.html"

# Runs in the page: an agent with the SDK's defaults, connected with a client secret, and
# a log of every event the transport sees. `options`: tool, websocket.
START = """async ([options, key]) => {
  const {RealtimeAgent, RealtimeSession, OpenAIRealtimeWebRTC, OpenAIRealtimeWebSocket,
         tool, z} = window.AgentsRealtime;
  window.seen = []; window.toolRuns = [];
  const tools = options.tool ? [tool({
    name: "get_weather", description: "The weather in a city.",
    parameters: z.object({city: z.string()}),
    execute: async ({city}) => { window.toolRuns.push(city);
                                 return {weather: "sunny", celsius: 21}; },
  })] : [];
  const agent = new RealtimeAgent({name: "Assistant", tools,
    instructions: "You are a helpful voice assistant. Answer in one short sentence."});
  let transport;
  if (options.websocket) {
    transport = new OpenAIRealtimeWebSocket({
      url: location.origin.replace("http", "ws") + "/v1/realtime?model=embedded"});
  } else {
    let mediaStream;
    if (options.tool) {  // keep the microphone out of it: the question is typed
      // Silence, sent all the time as a microphone is (no audio at all ends the call).
      const context = new AudioContext();
      const tone = context.createOscillator();
      const mute = context.createGain();
      const destination = context.createMediaStreamDestination();
      mute.gain.value = 0;
      tone.connect(mute).connect(destination);
      tone.start();
      await context.resume();
      mediaStream = destination.stream;
    }
    transport = new OpenAIRealtimeWebRTC({
      baseUrl: location.origin + "/v1/realtime/calls", mediaStream});
  }
  const config = options.tool
    ? {toolChoice: {type: "function", name: "get_weather"}} : {};
  const session = new RealtimeSession(agent, {transport, model: "embedded", config});
  session.on("transport_event", (event) => window.seen.push(event));
  await session.connect({apiKey: key});
  window.session = session;
}"""
SEEN_TYPES = "() => window.seen.map((e) => e.type)"


@pytest.fixture
async def browser(speech: Callable[[str], Path]) -> AsyncIterator[Any]:
    if not BUNDLE.exists():
        pytest.skip("the Agents SDK is not bundled: make test does it (npm and esbuild)")
    async with chromium(speech(QUESTION)) as launched:
        yield launched


async def open_page(browser: Any, server: ServerProcess) -> Any:
    """A page at the agent's origin that loads the SDK bundle."""
    page = await (await browser.new_context()).new_page()
    html = '<!doctype html><title>Agents SDK</title><script src="agents.js"></script>'

    async def serve(route: Any) -> None:
        if route.request.url.endswith("agents.js"):
            await route.fulfill(body=BUNDLE.read_bytes(), content_type="text/javascript")
        else:
            await route.fulfill(body=html, content_type="text/html")

    await page.route(f"{server.url}/agents-sdk/**", serve)
    await page.goto(server.url + PAGE)
    return page


async def client_secret(server: ServerProcess) -> str:
    """What a deployment's backend would hand the page."""
    async with httpx.AsyncClient(timeout=10) as http:
        response = await http.post(f"{server.url}/v1/realtime/client_secrets", json={})
    return str(response.json()["value"])


async def wait_for(page: Any, kind: str, count: int = 1, timeout_s: float = 90) -> None:
    await page.wait_for_function(
        f"window.seen.filter((e) => e.type === {json.dumps(kind)}).length >= {count}",
        timeout=timeout_s * 1000,
    )


async def events(page: Any, kind: str) -> list[dict[str, Any]]:
    seen: list[dict[str, Any]] = await page.evaluate(
        f"window.seen.filter((e) => e.type === {json.dumps(kind)})"
    )
    return seen


async def test_the_sdk_over_webrtc_with_its_defaults_hears_and_answers(
    steady_agent_server: ServerProcess, browser: Any
) -> None:
    page = await open_page(browser, steady_agent_server)
    try:
        await page.evaluate(START, [{}, await client_secret(steady_agent_server)])
        updated = (await events(page, "session.updated"))[0]["session"]
        assert updated["instructions"].startswith("You are a helpful voice assistant.")
        assert updated["audio"]["input"]["turn_detection"]["type"] == "semantic_vad", (
            "the SDK's default turn detection, taken as it is"
        )
        await wait_for(page, "conversation.item.input_audio_transcription.completed")
        heard = (await events(page, "conversation.item.input_audio_transcription.completed"))[0]
        assert word_error_rate(QUESTION, heard["transcript"]) <= 0.25, heard["transcript"]
        await wait_for(page, "response.done")
        done = (await events(page, "response.done"))[0]["response"]
        assert done["status"] == "completed"
        assert "output_audio_buffer.started" in await page.evaluate(SEEN_TYPES), "it spoke"
        said = (await events(page, "response.output_audio_transcript.done"))[0]["transcript"]
        assert said.strip()
        assert await events(page, "error") == []
    finally:
        await page.evaluate("window.session && window.session.close()")


async def test_the_sdk_runs_a_forced_tool_and_the_answer_uses_its_result(
    steady_agent_server: ServerProcess, browser: Any
) -> None:
    page = await open_page(browser, steady_agent_server)
    try:
        await page.evaluate(START, [{"tool": True}, await client_secret(steady_agent_server)])
        updated = (await events(page, "session.updated"))[0]["session"]
        assert [tool["name"] for tool in updated["tools"]] == ["get_weather"]
        await page.evaluate("window.session.sendMessage('What is the weather in Paris?')")
        await wait_for(page, "response.done", count=2)
        assert len(await page.evaluate("window.toolRuns")) == 1, "the page ran the tool once"
        first, second = [e["response"] for e in await events(page, "response.done")][:2]
        assert [item["type"] for item in first["output"]] == ["function_call"]
        assert second["status"] == "completed"
        said = second["output"][0]["content"][0]["transcript"]
        assert "sunny" in said.lower() or "21" in said, said
        assert await events(page, "error") == []
    finally:
        await page.evaluate("window.session && window.session.close()")


async def test_the_sdk_over_its_websocket_from_the_page(
    steady_agent_server: ServerProcess, browser: Any
) -> None:
    page = await open_page(browser, steady_agent_server)
    try:
        await page.evaluate(START, [{"websocket": True}, await client_secret(steady_agent_server)])
        await page.evaluate("window.session.sendMessage('Say hello.')")
        await wait_for(page, "response.done")
        done = (await events(page, "response.done"))[0]["response"]
        assert done["status"] == "completed"
        deltas = await events(page, "response.output_audio.delta")
        assert deltas and sum(len(d["delta"]) for d in deltas) > 10_000, "audio came as deltas"
        assert await events(page, "error") == []
    finally:
        await page.evaluate("window.session && window.session.close()")
