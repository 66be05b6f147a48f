"""Chaos: callers that vanish or go quiet, a server that stops for half a second, and a
SIGTERM in the middle of a storm of offers. After each, the pool is whole again without
a restart (or, for SIGTERM, the server ends cleanly)."""

from __future__ import annotations

import asyncio
import json
import signal
import sys
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from clients import AgentClient
from tests.support.server import REPO, ServerProcess, until_in_use

pytestmark = pytest.mark.e2e

SENTENCE = "Hello there, this is a sentence for the echo to play back."


class Peer:
    """tests/support/chaos_peer.py in its own process."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.events: list[str] = []
        self.session_id = ""

    @classmethod
    async def call(cls, url: str, wav: Path) -> Peer:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "tests.support.chaos_peer", url, str(wav),
            cwd=REPO, stdout=asyncio.subprocess.PIPE,
        )  # fmt: skip
        peer = cls(process)
        first = json.loads(await asyncio.wait_for(peer._line(), 30))
        peer.session_id = first["session_id"]
        return peer

    async def _line(self) -> bytes:
        assert self.process.stdout is not None
        line = await self.process.stdout.readline()
        if not line:
            raise EOFError("the peer exited")
        return line

    async def until(self, event: str, count: int = 1, timeout_s: float = 60) -> None:
        deadline = time.monotonic() + timeout_s
        while self.events.count(event) < count:
            line = await asyncio.wait_for(self._line(), max(0.1, deadline - time.monotonic()))
            self.events.append(json.loads(line)["event"])

    async def kill(self) -> None:
        if self.process.returncode is None:
            self.process.kill()
        await self.process.wait()


@pytest.fixture
async def peers() -> AsyncIterator[list[Peer]]:
    started: list[Peer] = []
    yield started
    for peer in started:
        await peer.kill()


async def pool(url: str) -> dict[str, Any]:
    async with httpx.AsyncClient(timeout=10) as http:
        return dict((await http.get(f"{url}/v1/pool")).json())


async def whole_again(server: ServerProcess) -> None:
    """Every slot idle, and a new call answered."""
    await until_in_use(server.url, 0, timeout_s=30)
    assert {slot["state"] for slot in (await pool(server.url))["slots"]} == {"idle"}
    client = AgentClient(server.url)
    try:
        await client.connect()
        await client.wait_for("session.created", timeout_s=20)
    finally:
        await client.close()


async def test_a_caller_that_vanishes_mid_reply_frees_its_slot(
    start_server: Callable[..., ServerProcess], speech: Callable[[str], Path], peers: list[Peer]
) -> None:
    server = start_server("--agent", "echo", "--max-sessions", "2", "--pool-media-timeout-s", "2")
    peer = await Peer.call(server.url, speech(SENTENCE))
    peers.append(peer)
    await peer.until("output_audio_buffer.started")
    await peer.kill()  # mid-reply: no BYE, no DTLS close, no more packets
    await whole_again(server)


async def test_a_caller_whose_network_stalls_for_5_s_carries_on(
    start_server: Callable[..., ServerProcess], speech: Callable[[str], Path], peers: list[Peer]
) -> None:
    server = start_server("--agent", "echo", "--max-sessions", "2", "--pool-media-timeout-s", "8")
    peer = await Peer.call(server.url, speech(SENTENCE))
    peers.append(peer)
    await peer.until("response.done")
    peer.process.send_signal(signal.SIGSTOP)  # nothing in or out, as a dead network
    await asyncio.sleep(5)
    peer.process.send_signal(signal.SIGCONT)
    # The same call answers its next turns, and was never ended.
    await peer.until("response.done", count=3, timeout_s=90)
    assert "error" not in peer.events, peer.events
    states = {slot["session_id"]: slot["state"] for slot in (await pool(server.url))["slots"]}
    assert states[peer.session_id] == "active"
    await peer.kill()
    await whole_again(server)


async def test_a_server_that_stops_for_half_a_second_carries_on(
    start_server: Callable[..., ServerProcess], speech: Callable[[str], Path], peers: list[Peer]
) -> None:
    server = start_server("--agent", "echo", "--max-sessions", "2")
    peer = await Peer.call(server.url, speech(SENTENCE))
    peers.append(peer)
    await peer.until("output_audio_buffer.started")
    server.proc.send_signal(signal.SIGSTOP)  # its event loop (and all else) blocked
    await asyncio.sleep(0.5)
    server.proc.send_signal(signal.SIGCONT)
    await peer.until("response.done", count=2, timeout_s=90)
    assert "error" not in peer.events, peer.events
    await peer.kill()
    await whole_again(server)


async def test_sigterm_in_a_storm_of_offers_ends_every_call_cleanly(
    start_server: Callable[..., ServerProcess], speech: Callable[[str], Path], peers: list[Peer]
) -> None:
    server = start_server("--agent", "echo", "--max-sessions", "3")
    for _ in range(3):
        peers.append(await Peer.call(server.url, speech(SENTENCE)))
    await asyncio.gather(*(peer.until("output_audio_buffer.started") for peer in peers))
    offers = [await AgentClient(server.url).offer() for _ in range(20)]

    async def offer(sdp: str) -> int:
        try:
            async with httpx.AsyncClient(timeout=20) as http:
                answer = await http.post(f"{server.url}/offer", json={"sdp": sdp, "type": "offer"})
                return answer.status_code
        except httpx.TransportError:
            return 0  # the server had stopped listening

    storm = [asyncio.create_task(offer(sdp)) for sdp in offers]
    await asyncio.sleep(0.05)
    server.proc.send_signal(signal.SIGTERM)
    codes = await asyncio.gather(*storm)
    # Every call in progress heard why it ended.
    await asyncio.gather(*(peer.until("error", timeout_s=20) for peer in peers))
    returncode = await asyncio.to_thread(server.proc.wait, 20)
    assert returncode in (0, -signal.SIGTERM), server.log()
    # Refused while full or draining (503), or not reached once it stopped listening.
    assert set(codes) <= {0, 503}, codes
    assert "Traceback" not in server.log(), server.log()
