"""Hostile client events at the Realtime adapter: whatever arrives, the answer is events
a Realtime SDK parses (an error at worst, never an internal one), and the session still
answers afterwards."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.fuzz.strategies import client_events
from tests.realtime.test_dialect import SERVER_EVENT, Client

HELLO = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Hi"}]}


def check(replies: list[dict[str, Any]]) -> None:
    for reply in replies:
        SERVER_EVENT.validate_python(reply)
        if reply["type"] == "error":
            assert reply["error"]["code"] != "internal", reply


async def still_answers(client: Client) -> None:
    """A written reply to a typed question, whatever the events before left behind."""
    client.send({"type": "response.cancel"})
    client.send({"type": "session.update", "session": {"output_modalities": ["text"]}})
    before = len(client.of("response.done"))
    client.send(json.dumps({"type": "conversation.item.create", "item": HELLO}))
    client.send({"type": "response.create"})
    await client.wait_for("response.done", count=before + 1, timeout_s=20)
    assert client.of("response.done")[-1]["response"]["status"] == "completed"


@settings(max_examples=60, deadline=None)
@given(st.lists(client_events, min_size=1, max_size=25))
async def test_any_events_get_valid_answers_and_the_session_goes_on(
    events: list[dict[str, Any]],
) -> None:
    client = Client()
    try:
        for event in events:
            before = len(client.wire)
            client.send(event)  # raises nothing, whatever it is
            await asyncio.sleep(0)  # let what it started take its first step
            check(client.wire[before:])
        await still_answers(client)
        check(client.wire)
    finally:
        await client.session.close()


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.text(max_size=200), st.binary(max_size=200).map(repr)), max_size=5))
async def test_any_text_gets_valid_answers(texts: list[str]) -> None:
    client = Client()
    try:
        for text in texts:
            client.send(text)
        check(client.wire)
        assert len(client.of("error")) >= len([t for t in texts if not t.startswith("{")])
    finally:
        await client.session.close()
