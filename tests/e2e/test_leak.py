"""100 sessions, four callers at a time (one per slot) one after another: nothing may
pile up in the server."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from clients import AgentClient, Refused, load_wav
from tests.support.server import PoolFull, ServerProcess, leaves_nothing_behind
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
    client = await connected(url)
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
    await leaves_nothing_behind(
        server.url, lambda _: one_session(server.url, utterance), sessions=SESSIONS,
        at_once=CALLERS, rss_bound_mb=RSS_BOUND_MB,
    )  # fmt: skip
