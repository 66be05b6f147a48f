"""What an attack costs a running server, measured from outside while it runs: the
slowest /readyz answer (the event loop's stalls) and how far its RSS rose."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import sys
import threading
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

import numpy as np
import psutil
import websockets

from tests.support.server import REPO, ServerProcess


@dataclass(slots=True)
class Pressure:
    worst_readyz_s: float = 0.0
    rss_before: int = 0
    rss_peak: int = 0
    # What a stall is set beside: when slow answers came, the least memory the machine had
    # left, and the processes (the server's aside) that took the most CPU meanwhile.
    slow_readyz: str = ""
    least_available: int = 0
    busiest: str = ""

    @property
    def grown_mb(self) -> float:
        return (self.rss_peak - self.rss_before) / 2**20

    def __str__(self) -> str:
        before, peak = self.rss_before / 2**20, self.rss_peak / 2**20
        stall_ms = self.worst_readyz_s * 1000
        told = f"slowest /readyz {stall_ms:.0f} ms, RSS {before:.0f} -> {peak:.0f} MB"
        if self.slow_readyz:
            told += f" (slow answers: {self.slow_readyz}; machine memory left at least "
            told += f"{self.least_available / 2**20:.0f} MB; busiest: {self.busiest})"
        return told


def cpu_seconds() -> dict[int, tuple[str, float]]:
    """Every process's name and CPU time so far, by pid."""
    seconds = {}
    for process in psutil.process_iter(["name", "cpu_times"]):
        times = process.info["cpu_times"]
        if times is not None:
            seconds[process.pid] = (process.info["name"], times.user + times.system)
    return seconds


def busiest(before: dict[int, tuple[str, float]], others_than: int) -> str:
    """The three processes other than `others_than` that took the most CPU since `before`."""
    used = {
        (pid, name): spent - before.get(pid, (name, 0.0))[1]
        for pid, (name, spent) in cpu_seconds().items()
        if pid != others_than
    }
    ranked = sorted(used, key=used.__getitem__, reverse=True)[:3]
    return ", ".join(f"{name} ({pid}) {used[pid, name]:.1f} s" for pid, name in ranked)


@contextlib.asynccontextmanager
async def watching(server: ServerProcess) -> AsyncIterator[Pressure]:
    """Poll /readyz every 20 ms from a process of its own (readyz_poller.py: the attack is
    made in this process, and this process's own pauses are not the server's), and the
    server's RSS every 50 ms from a thread, while the block runs."""
    process = psutil.Process(server.proc.pid)
    pressure = Pressure(rss_before=process.memory_info().rss)
    pressure.rss_peak = pressure.rss_before
    pressure.least_available = psutil.virtual_memory().available
    cpu_before = cpu_seconds()
    stop = threading.Event()

    def sample_rss() -> None:
        while not stop.is_set():
            pressure.rss_peak = max(pressure.rss_peak, process.memory_info().rss)
            available = psutil.virtual_memory().available
            pressure.least_available = min(pressure.least_available, available)
            stop.wait(0.05)

    poller = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tests.support.readyz_poller", server.url,
        cwd=REPO, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert poller.stdout is not None and poller.stdin is not None
    sampler = threading.Thread(target=sample_rss)
    sampler.start()
    try:
        assert await asyncio.wait_for(poller.stdout.readline(), 60) == b"polling\n"
        yield pressure
    finally:
        await asyncio.sleep(0.5)  # what the last messages left the server to do
        stop.set()
        poller.stdin.close()
        told, _ = await asyncio.wait_for(poller.communicate(), 150)
        worst, _, slow = told.decode().partition("\n")
        pressure.worst_readyz_s = float(worst.strip() or "inf")
        pressure.slow_readyz = slow.strip()
        await asyncio.to_thread(sampler.join)
        if pressure.slow_readyz:
            pressure.busiest = await asyncio.to_thread(busiest, cpu_before, server.proc.pid)


async def answered_call(url: str, *, key: str | None = None, timeout_s: float = 30) -> float:
    """A normal caller of the echo agent over the Realtime WebSocket: a second of audio,
    committed, is played back. Seconds from the socket opening to its first audio."""
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    started = time.monotonic()
    ws_url = url.replace("http://", "ws://") + "/v1/realtime?model=x"
    # Loud noise, which webrtcvad (the server's --vad-detector here) takes for speech, then
    # the silence that ends the turn.
    noise = (np.random.default_rng(3).standard_normal(24_000) * 3000).astype(np.int16)
    audio = noise.tobytes() + bytes(2 * 36_000)
    async with (
        asyncio.timeout(timeout_s),
        websockets.connect(ws_url, additional_headers=headers, max_size=None) as ws,
    ):
        append = {"type": "input_audio_buffer.append", "audio": base64.b64encode(audio).decode()}
        await ws.send(json.dumps(append))
        async for raw in ws:
            event = json.loads(raw)
            assert event["type"] != "error", event
            if event["type"] == "response.output_audio.delta":
                return time.monotonic() - started
    raise AssertionError("the call ended unanswered")
