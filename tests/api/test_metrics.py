"""GET /metrics: Prometheus text, counted from what the server really did."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import httpx

from clients import AgentClient, load_wav
from tests.api.test_signalling import post_offer
from tests.support.metrics import scrape, stage_counts
from tests.support.server import ServerProcess
from tests.support.speech import QUESTION


async def test_calls_slots_replies_and_refusals_are_counted(
    start_server: Callable[..., ServerProcess], speech: Callable[[str], Path]
) -> None:
    server = start_server("--agent", "echo", "--max-sessions", "1")
    before = await scrape(server.url)
    assert before[("voice_agent_build_info", (("agent", "echo"), ("version", "0.1.0")))] == 1
    assert before[("voice_agent_slots", (("state", "idle"), ("transport", "")))] == 1
    client = AgentClient(server.url)
    await client.connect()
    try:
        client.mic.say(load_wav(str(speech(QUESTION))))
        await client.wait_for("response.done", timeout_s=60)
        refused = AgentClient(server.url)
        response = await post_offer(
            server.url, json={"sdp": await refused.offer(), "type": "offer"}
        )
        await refused.close()
        assert response.status_code == 503
        during = await scrape(server.url)
    finally:
        await client.close()

    calls = {
        dict(labels)["outcome"]: value
        for (name, labels), value in during.items()
        if name == "voice_agent_calls_total" and dict(labels)["transport"] == "webrtc"
    }
    assert calls == {"accepted": 1, "session_limit_reached": 1}
    assert during[("voice_agent_slots", (("state", "active"), ("transport", "webrtc")))] == 1
    assert during[("voice_agent_replies_total", (("reason", ""), ("status", "completed")))] == 1
    # The echo has no STT, LLM or TTS stage; its turn ended, and its reply's audio went out.
    assert stage_counts(during) == {"turn_end": 1, "first_frame_sent": 1}
    # The turn ended after server_vad's 500 ms of silence, and the echo went out after it.
    assert during[("voice_agent_end_of_turn_seconds_count", ())] == 1
    assert during[("voice_agent_end_of_turn_seconds_sum", ())] == 0.5
    assert during[("voice_agent_voice_to_voice_seconds_count", ())] == 1
    assert during[("voice_agent_voice_to_voice_seconds_sum", ())] > 0.5
    assert ("voice_agent_speculative_replies_total", (("outcome", "started"),)) in during
    assert ("voice_agent_interruptions_total", (("outcome", "paused"),)) in during


async def test_metrics_need_the_key_only_when_told(
    start_server: Callable[..., ServerProcess],
) -> None:
    guarded = start_server(
        "--agent", "echo", "--server-api-key", "k3y", "--server-metrics-need-key", "true"
    )
    async with httpx.AsyncClient(timeout=10) as http:
        refused = await http.get(f"{guarded.url}/metrics")
        assert refused.status_code == 401 and "error" in refused.json()
        wrong = await http.get(f"{guarded.url}/metrics", headers={"Authorization": "Bearer no"})
        assert wrong.status_code == 401
    assert await scrape(guarded.url, token="k3y")
    async with httpx.AsyncClient(timeout=10) as http:
        # /v1/usage observes every call: with a key set it always needs it.
        assert (await http.get(f"{guarded.url}/v1/usage")).status_code == 401
        keyed = await http.get(f"{guarded.url}/v1/usage", headers={"Authorization": "Bearer k3y"})
        assert keyed.status_code == 200 and keyed.json()["sessions"] == []
    guarded.stop()
    open_ = start_server("--agent", "echo", "--server-api-key", "k3y")
    assert await scrape(open_.url), "a key for calls does not close /metrics by itself"
