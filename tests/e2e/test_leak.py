"""100 sessions, four callers at a time (one per slot) one after another: nothing may
pile up in the server."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from pathlib import Path

import pytest

from clients import AgentClient, Refused, load_wav
from tests.support.server import (
    GAUGES,
    PoolFull,
    ServerProcess,
    gauges_after,
    once_admitted,
    server_stats,
    until_in_use,
)
from tests.support.speech import have_espeak, speak_to_wav

pytestmark = pytest.mark.e2e

SESSIONS = 100
CALLERS = 4  # at once, each making its share one after another: a quarter of the time
# Allowed RSS growth over the 100 sessions: allocator high-water marks move a
# little (Opus/SRTP contexts, pymalloc arenas); a real leak of per-session state
# (resamplers, tracks, peers: ~2 MB each) would blow well past it.
RSS_BOUND_MB = 40.0


async def connected(url: str) -> AgentClient:
    """A call (PoolFull: every slot is in use)."""
    client = AgentClient(url)
    try:
        await client.connect()
    except Refused as refused:
        await client.close()
        if refused.status == 503:
            raise PoolFull from refused
        raise
    return client


async def one_session(url: str, utterance: object) -> None:
    client = await once_admitted(lambda: connected(url))
    try:
        client.mic.say(utterance)  # type: ignore[arg-type]
        done = await client.wait_for("response.done", timeout_s=20)
        assert done["response"]["status"] == "completed"
    finally:
        await client.close()


async def test_a_hundred_sessions_leave_nothing_behind(
    start_server: Callable[..., ServerProcess], tmp_path: Path
) -> None:
    if not have_espeak():
        pytest.skip("espeak-ng is not installed (make test installs it)")
    speak_to_wav("Hi there.", tmp_path / "hi.wav", lead_silence_s=0.2)
    utterance = load_wav(str(tmp_path / "hi.wav"))
    server = start_server("--agent", "echo", "--max-sessions", "4", "--vad-silence-ms", "200")
    for _ in range(3):  # warm up lazily created state (codecs, executors)
        await one_session(server.url, utterance)
    await until_in_use(server.url, 0)
    before = await server_stats(server.url)

    async def caller() -> None:
        for _ in range(SESSIONS // CALLERS):
            await one_session(server.url, utterance)

    await asyncio.gather(*(caller() for _ in range(CALLERS)))

    pool = await until_in_use(server.url, 0)
    assert {slot["state"] for slot in pool["slots"]} == {"idle"}
    after = await gauges_after(server.url, before)
    logging.getLogger(__name__).info("before %s, after %d sessions %s", before, SESSIONS, after)
    assert after["calls"] == 0
    for gauge in GAUGES:
        assert after[gauge] <= before[gauge], (gauge, before, after)
    assert after["rss_mb"] - before["rss_mb"] <= RSS_BOUND_MB, (before, after)
