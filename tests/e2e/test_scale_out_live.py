"""Live sessions behind the shipped HAProxy (deploy/haproxy/haproxy.cfg): with every
replica full, a session's follow-ups (its sideband, its hangup) still reach the replica
that holds it, at /v1/live/sessions (the openai SDK's defaults) and /live/sessions."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path

import pytest
from openai import AsyncOpenAI
from openai.resources.live.live import AsyncLiveConnection

from tests.e2e.test_scale_out import REPLICAS, haproxy, in_use
from tests.support.server import ServerProcess, until_in_use

pytestmark = pytest.mark.e2e


async def started(sdk: AsyncOpenAI, held: list[AsyncLiveConnection]) -> str:
    """A Live session through the proxy, held open; its id. A replica that filled up
    since the proxy's last check refuses it: tried again, as a client would."""
    for _ in range(40):
        conn = await sdk.live.connect().enter()
        await conn.session.start(session={"model": "gpt-live-1"})
        event = json.loads(await asyncio.wait_for(conn.recv_bytes(), 20))
        if event["type"] == "session.started":
            held.append(conn)
            return str(event["session"]["id"])
        assert event["error"]["code"] == "session_limit_reached", event
        await conn.close()
        await asyncio.sleep(0.3)
    raise AssertionError("no replica took the session")


async def test_live_follow_ups_find_their_replica(
    start_server: Callable[..., ServerProcess], tmp_path: Path
) -> None:
    replicas = {
        name: start_server("--agent", "echo", "--max-sessions", "1", "--server-replica", name)
        for name in REPLICAS
    }
    held: list[AsyncLiveConnection] = []
    with haproxy(replicas, tmp_path / "haproxy.log") as url:
        sdk = AsyncOpenAI(base_url=f"{url}/v1", api_key="sk-anything", max_retries=0)
        bare = AsyncOpenAI(base_url=url, api_key="sk-anything", max_retries=0)
        try:
            ids = [await started(sdk, held), await started(sdk, held)]
            assert sorted(session_id.split("_")[1] for session_id in ids) == sorted(REPLICAS)
            # Both replicas are full now, out of turn for new calls; not for their own.
            for client, session_id in zip((sdk, bare), ids, strict=True):
                async with client.live.sideband.connect(session_id=session_id) as sideband:
                    first = json.loads(await asyncio.wait_for(sideband.recv_bytes(), 10))
                    assert first["type"] == "session.updated", first
                await client.live.sessions.hangup(session_id)
            for replica in replicas.values():
                await until_in_use(replica.url, 0)
            assert all(in_use(replica) == 0 for replica in replicas.values())
        finally:
            for conn in held:
                await conn.close()
            await sdk.close()
            await bare.close()
