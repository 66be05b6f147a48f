"""Hostile events on the data channel, over real aiortc peers and the echo server: each
gets an error event, and the call goes on."""

from __future__ import annotations

import json
from collections.abc import Callable

import httpx
import pytest

from clients import AgentClient
from tests.support.server import ServerProcess

pytestmark = pytest.mark.e2e

PEER_MAX_MESSAGE = 262_144  # what an aiortc peer takes in one data channel message


async def test_bad_events_cost_an_error_each_and_never_the_call(
    start_server: Callable[..., ServerProcess],
) -> None:
    # Instructions may be as long as a data channel message takes, here.
    server = start_server("--agent", "echo", "--limits-instructions-chars", "300000")
    client = AgentClient(server.url)
    await client.connect()
    try:
        await client.wait_for("session.created", timeout_s=20)
        # Just under the peer's limit coming in; its session.updated echo is over it.
        update = {"type": "session.update", "session": {"instructions": ""}}
        room = PEER_MAX_MESSAGE - len(json.dumps(update)) - 16
        client.send({"type": "session.update", "session": {"instructions": "i" * room}})
        client.send({"type": "t" * 200_000})
        client.channel.send("[" * 3000 + "]" * 3000)
        await client.wait_for("error", count=3, timeout_s=20)
        codes = [event["error"]["code"] for event in client.of_type("error")]
        assert codes == ["event_too_large", "unknown_event", "invalid_json"], codes
        assert "session.updated" in client.of_type("error")[0]["error"]["message"]

        # The same connection still works.
        client.send({"type": "session.update", "session": {"instructions": "Be brief."}})
        updated = await client.wait_for("session.updated", timeout_s=20)
        assert updated["session"]["instructions"] == "Be brief."
        async with httpx.AsyncClient(timeout=10) as http:
            pool = (await http.get(f"{server.url}/v1/pool")).json()
        states = {slot["session_id"]: slot["state"] for slot in pool["slots"]}
        assert states[client.session_id] == "active"
    finally:
        await client.close()


async def test_the_largest_event_is_a_setting(start_server: Callable[..., ServerProcess]) -> None:
    server = start_server("--agent", "echo", "--limits-event-bytes", str(16 * 1024))
    client = AgentClient(server.url)
    await client.connect()
    try:
        await client.wait_for("session.created", timeout_s=20)
        client.send({"type": "session.update", "session": {"instructions": "i" * 20_000}})
        error = await client.wait_for("error", timeout_s=20)
        assert error["error"]["code"] == "invalid_message" and "16 KiB" in error["error"]["message"]
    finally:
        await client.close()
