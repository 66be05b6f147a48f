"""Run the real server (`python -m app`) in a subprocess on a free loopback port."""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import httpx

REPO = Path(__file__).resolve().parents[2]
T = TypeVar("T")

# The default LLM, Qwen2.5-Coder-1.5B, is chosen for what it says (tests/e2e/test_answers.py
# starts it); a test of the plumbing runs the 0.5B unless it names a model
# (tests/conftest.py), as its replies come in half the time and the run has some ninety
# servers to start. A bench's server runs the default.
DEFAULT_LLM = "qwen2.5-coder-1.5b"
PLUMBING_LLM = "qwen2.5-coder-0.5b"
LLM_CHOICES = ("--llm-embedded", "--llm-model-path", "--llm-base-url")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class ServerProcess:
    def __init__(self, args: list[str], log_path: Path, env: dict[str, str] | None = None) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.sip_port = int(args[args.index("--sip-port") + 1]) if "--sip-port" in args else 0
        self.log_path = log_path
        self._log = open(log_path, "wb")  # noqa: SIM115 - closed in stop()
        # Tests make calls from one address far faster than a client should: the rate
        # limit is off unless a test sets it (tests/api/test_limits.py does).
        rate = any(arg.startswith("--limits-calls-per-minute") for arg in args)
        if not rate:
            args = ["--limits-calls-per-minute", "0", *args]
        # So is the share of the slots one address may hold (tests/api/test_admission.py).
        share = any(arg.startswith("--limits-address-slots") for arg in args)
        if not share:
            args = ["--limits-address-slots", "1", *args]
        # A test of those limits calls from this machine, which they otherwise spare.
        if (rate or share) and not any(a.startswith("--limits-loopback-exempt") for a in args):
            args = ["--limits-loopback-exempt", "false", *args]
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "app", "--host", "127.0.0.1", "--port", str(self.port), *args],
            cwd=REPO,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env={**os.environ, **(env or {})},
        )

    def wait_healthy(self, timeout_s: float = 180.0) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited ({self.proc.returncode}):\n{self.log()}")
            try:
                if httpx.get(f"{self.url}/healthz", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise TimeoutError(f"server not healthy in {timeout_s}s:\n{self.log()}")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-6000:]

    def stop(self, timeout_s: float = 15.0) -> int | None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()
        return self.proc.returncode


async def until_in_use(
    url: str,
    count: int,
    *,
    state: str | None = None,
    timeout_s: float = 15.0,
    key: str | None = None,
) -> dict:
    """Poll /v1/pool until `count` slots are in use (in `state`, if given); return the pool.
    `key`: the server's API key, where it has one."""
    pool: dict = {}
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    async with httpx.AsyncClient(timeout=5, headers=headers) as http:
        for _ in range(int(timeout_s / 0.1)):
            pool = (await http.get(f"{url}/v1/pool")).json()
            states = [slot["state"] for slot in pool["slots"]]
            held = states.count(state) if state is not None else pool["in_use"]
            if held == count:
                return pool
            await asyncio.sleep(0.1)
    raise AssertionError(f"never {count} slots {state or 'in use'} at {url}: {pool}")


class PoolFull(Exception):
    """The server answered that every slot is in use."""


async def once_admitted(attempt: Callable[[], Awaitable[T]], *, timeout_s: float = 10) -> T:
    """`attempt()`, again while it raises PoolFull: the slot a caller has just left drains
    a moment before it is free, as a client retrying after Retry-After finds."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return await attempt()
        except PoolFull:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.05)


async def leaves_nothing_behind(
    url: str,
    run: Callable[[int], Awaitable[None]],
    *,
    sessions: int,
    at_once: int,
    rss_bound_mb: float,
) -> None:
    """`run(i)` for `sessions` sessions, by `at_once` callers each making its share one
    after another: nothing may pile up in the server at `url` (slots, tasks, threads, file
    descriptors), and its memory may grow by `rss_bound_mb` at most. `run` raises PoolFull
    where every slot is in use; the caller tries again."""

    async def callers(count: int) -> None:
        async def caller(first: int) -> None:
            for i in range(first, count, at_once):
                await once_admitted(functools.partial(run, i))

        await asyncio.gather(*(caller(first) for first in range(at_once)))

    # Warm up what is made lazily (codecs, executors), as many at once as after: a thread
    # pool grows to what the calls at once ask of it, and that is no leak.
    await callers(max(3, 2 * at_once))
    await until_in_use(url, 0)
    before = await server_stats(url)
    await callers(sessions)
    pool = await until_in_use(url, 0, timeout_s=30)
    assert {slot["state"] for slot in pool["slots"]} == {"idle"}
    after = await gauges_after(url, before)
    logging.getLogger(__name__).info("before %s, after %d sessions %s", before, sessions, after)
    assert after["calls"] == 0
    for gauge in GAUGES:
        assert after[gauge] <= before[gauge], (gauge, before, after)
    assert after["rss_mb"] - before["rss_mb"] <= rss_bound_mb, (before, after)


async def server_stats(url: str) -> dict:
    """GET /v1/stats: the process's gauges and counters."""
    async with httpx.AsyncClient(timeout=10) as http:
        stats: dict = (await http.get(f"{url}/v1/stats")).json()
    return stats


GAUGES = ("asyncio_tasks", "threads", "open_fds")


async def gauges_after(url: str, before: dict, *, tries: int = 50) -> dict:
    """/v1/stats once its gauges are back to `before`'s, or after `tries` tenths of a
    second: ending sessions finish their last steps (timers, peers) a little late."""
    after = await server_stats(url)
    for _ in range(tries):
        if all(after[gauge] <= before[gauge] for gauge in GAUGES):
            break
        await asyncio.sleep(0.1)
        after = await server_stats(url)
    return after
