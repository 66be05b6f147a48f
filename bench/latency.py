"""Voice-to-voice latency with N concurrent WebRTC sessions, measured at the client.

    python -m bench.latency --sessions 1
    python -m bench.latency --sessions 4 --turns 3 --silence-ms 400
    python -m bench.latency --longer   # 3-4 s questions
    python -m bench.latency --url http://host:8000   # an already running server
    python -m bench.latency --llm-url http://127.0.0.1:8001/v1   # vLLM (make vllm) as the LLM

Prints p50/p95 voice-to-voice (end of the user's speech in the sent audio to the
first non-silent reply frame received), the server's per-stage breakdown from
`response.done`, and the server's RSS and CPU with 1 and with N sessions.
It prints figures; it asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import psutil

from app.agent.timings import STAGES
from app.engines.kokoro_edges import LEAD_S, TAIL_S, pause_after
from bench import machine
from clients import AgentClient, load_wav
from tests.support.server import ServerProcess, server_stats
from tests.support.speech import speak_to_wav

PROMPTS = [
    "What is the capital of France?",
    "Tell me something about the moon.",
    "How are you today?",
    "What colour is the sky?",
]
# Questions as long as people often ask them (3-4 s), for what grows with the words.
LONGER = [
    "Can you tell me how many minutes I should boil an egg for a soft yolk?",
    "What is the difference between a crocodile and an alligator?",
    "If I drive sixty miles an hour for three hours, how far do I get?",
    "Which planet in our solar system has the most moons around it?",
]


FRAME_S = 0.02  # of the client's received audio


@dataclass
class Turn:
    v2v_s: float | None
    vad_end_s: float  # end of speech in the sent audio -> speech_stopped received
    playout_s: float | None  # first transcript delta (sent as playout starts) -> first voice
    # The longest silence between the reply's first and last voiced frames: its own
    # pauses, and any wait for a piece that was not synthesized in time.
    longest_silence_s: float | None
    # At each join between the reply's pieces: how much longer than the pause its text
    # calls for the listener waited (a piece not made in time).
    waits_s: list[float]
    timings_ms: dict[str, float]
    status: str
    said: str = ""  # the reply's transcript


@dataclass
class Results:
    turns: list[Turn] = field(default_factory=list)
    finished: int = 0
    expected: int = 1
    all_finished: asyncio.Event = field(default_factory=asyncio.Event)

    def finish_one(self) -> None:
        self.finished += 1
        if self.finished >= self.expected:
            self.all_finished.set()


def waits_at_joins(
    voiced: list[float], clauses: list[tuple[float, str]], lag_s: float
) -> list[float]:
    """For each piece after a reply's first (its transcript delta arriving at `at`, sent as
    its audio starts, heard `lag_s` later): the silence before its first voiced frame,
    less what the text before it calls for: its mark's pause and the edges Kokoro's
    padding is cut to (kokoro_edges). `voiced`: arrival times of voiced 20 ms frames."""
    waits = []
    for (_, before), (at, _) in zip(clauses, clauses[1:], strict=False):
        heard = next((t for t in voiced if t >= at + lag_s - 0.03), None)
        last = max((t for t in voiced if heard is not None and t < heard), default=None)
        if heard is None or last is None:
            continue
        silence = heard - last - FRAME_S
        waits.append(max(0.0, silence - pause_after(before) - LEAD_S - TAIL_S))
    return waits


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


async def run_session(
    url: str,
    wavs: list[Path],
    turns: int,
    results: Results,
    index: int,
    hold: asyncio.Event | None = None,
) -> None:
    """Speak `turns` utterances; then stay connected until `hold` is set."""
    client = AgentClient(url)
    await client.connect()
    try:
        for turn in range(turns):
            wav = wavs[(index + turn) % len(wavs)]
            client.mic.say(load_wav(str(wav)))
            done = await client.wait_for("response.done", count=turn + 1, timeout_s=120)
            ended = client.mic.speech_ended_at
            assert ended is not None
            await client.wait_quiet(since=ended, quiet_s=0.8, timeout_s=60)
            first = client.recording.first_voice_after(ended)
            last = client.recording.last_voice_at()
            voiced = client.recording.voice_times(first, last + 0.001) if first and last else []
            silences = [b - a for a, b in zip(voiced, voiced[1:], strict=False)]
            clauses = [
                (at, e["delta"])
                for at, e in client.events
                if e["type"].endswith("transcript.delta") and at >= ended
            ]
            delta_at = clauses[0][0] if clauses else ended
            lag_s = first - delta_at if first is not None else 0.0
            results.turns.append(
                Turn(
                    v2v_s=None if first is None else first - ended,
                    vad_end_s=client.event_time("input_audio_buffer.speech_stopped", turn + 1)
                    - ended,
                    playout_s=None if first is None else first - delta_at,
                    longest_silence_s=max(silences, default=None),
                    waits_s=waits_at_joins(voiced, clauses, lag_s),
                    timings_ms=done["response"].get("timings_ms", {}),
                    status=done["response"]["status"],
                    said=" | ".join(text for _, text in clauses),
                )
            )
            await asyncio.sleep(0.5)
        results.finish_one()
        if hold is not None:
            await hold.wait()
    finally:
        await client.close()


# What run_concurrent starts per client: run_session's signature.
Caller = Callable[
    [str, list[Path], int, Results, int, asyncio.Event | None], Coroutine[None, None, None]
]


def prompt_wavs(folder: Path, prompts: list[str] | None = None) -> list[Path]:
    """`prompts` (PROMPTS) spoken by espeak-ng into WAVs in `folder`: what clients say."""
    wavs = []
    for i, text in enumerate(prompts or PROMPTS):
        speak_to_wav(text, folder / f"prompt{i}.wav")
        wavs.append(folder / f"prompt{i}.wav")
    return wavs


def rss_mb(pid: int) -> float:
    return psutil.Process(pid).memory_info().rss / 2**20


def cpu_s(pid: int) -> float:
    times = psutil.Process(pid).cpu_times()
    return float(times.user + times.system)


@dataclass
class Run:
    results: Results
    cpu_pct: float | None  # server CPU over the run, % of one core
    rss_mb: float | None  # server RSS with every session still connected


async def run_concurrent(
    url: str,
    pid: int | None,
    sessions: int,
    turns: int,
    wavs: list[Path],
    session: Caller = run_session,
) -> Run:
    """`sessions` clients at once; gauges are read before any of them hangs up.

    `session` runs each client (bench.gpu passes one that counts a failed client's
    turns instead of ending the run)."""
    results = Results(expected=sessions)
    hold = asyncio.Event()
    cpu0, wall0 = (cpu_s(pid) if pid else 0.0), time.monotonic()
    clients = [
        asyncio.create_task(session(url, wavs, turns, results, i, hold)) for i in range(sessions)
    ]
    waiter = asyncio.create_task(results.all_finished.wait())
    await asyncio.wait([waiter, *clients], return_when=asyncio.FIRST_COMPLETED)
    waiter.cancel()
    cpu_pct = (cpu_s(pid) - cpu0) / (time.monotonic() - wall0) * 100 if pid else None
    rss = rss_mb(pid) if pid else None
    hold.set()
    await asyncio.gather(*clients)
    return Run(results, cpu_pct, rss)


async def measure(url: str, pid: int | None, sessions: int, turns: int, wavs: list[Path]) -> None:
    print(machine())
    idle_rss = rss_mb(pid) if pid else None
    before, tokens = await speculation(url), await llm_tokens(url)
    one = await run_concurrent(url, pid, 1, turns, wavs)
    report("1 session", one.results, one.cpu_pct, each=True)
    before = report_speculation(before, await speculation(url))
    report_tokens(tokens, await llm_tokens(url), len(one.results.turns))
    if sessions > 1:
        many = await run_concurrent(url, pid, sessions, turns, wavs)
        report(f"{sessions} sessions", many.results, many.cpu_pct)
        report_speculation(before, await speculation(url))
        if one.rss_mb is not None and many.rss_mb is not None:
            print(
                f"RSS with {sessions} sessions connected after their turns: {many.rss_mb:.0f} MB "
                f"(+{(many.rss_mb - one.rss_mb) / (sessions - 1):.1f} MB per extra session)"
            )
    if idle_rss is not None:
        print(f"RSS idle (engines loaded): {idle_rss:.0f} MB; with 1 session: {one.rss_mb:.0f} MB")


async def speculation(url: str) -> dict[str, int]:
    """The server's speculation counters, over every session so far."""
    counters: dict[str, int] = (await server_stats(url))["speculation"]
    return counters


async def llm_tokens(url: str) -> dict[str, int]:
    """The LLM's prompt tokens over every session so far, and those it had read already."""
    async with httpx.AsyncClient(timeout=10) as http:
        total: dict[str, int] = (await http.get(f"{url}/v1/usage")).json()["total"]
    return total


def report_tokens(before: dict[str, int], after: dict[str, int], turns: int) -> None:
    """What the LLM read at each turn before its first token: the rest of the prompt had
    been read ahead (the last reply while it played, the user's words while they spoke)."""
    prompt = after["llm_tokens_in"] - before["llm_tokens_in"]
    read = prompt - (after["llm_tokens_in_cached"] - before["llm_tokens_in_cached"])
    if turns and prompt:
        print(f"LLM prompt tokens read at a turn: {read / turns:.1f} (of {prompt / turns:.0f})")


def report_speculation(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    """Print how many replies begun in a pause were kept and thrown away; return `after`."""
    started, kept, dropped = (after[k] - before[k] for k in ("started", "kept", "dropped"))
    share = f" ({kept / started:.0%} used)" if started else ""
    print(f"speculation: {started} replies begun in a pause, {kept} kept{share}, {dropped} dropped")
    return after


def report(label: str, results: Results, cpu_pct: float | None, each: bool = False) -> None:
    v2v = [t.v2v_s * 1000 for t in results.turns if t.v2v_s is not None]
    failed = sum(t.status != "completed" for t in results.turns)
    print(f"\n== {label}: {len(results.turns)} turns, {failed} not completed")
    # Turn by turn, so that what changes as a conversation grows shows.
    for n, t in enumerate(results.turns if each else [], 1):
        v2v_ms = "-" if t.v2v_s is None else f"{t.v2v_s * 1000:.0f}"
        at = t.timings_ms.get
        joins = " ".join(f"{w * 1000:.0f}" for w in t.waits_s)
        print(
            f"  turn {n:2d}: {v2v_ms:>5} ms, LLM first token {at('llm_first_token', 0):5.0f}, "
            f"first clause {at('first_clause', 0):5.0f}, first audio "
            f"{at('tts_first_audio', 0):5.0f}, waits at joins [{joins}]: {t.said!r}"
        )
    if v2v:
        print(
            f"voice-to-voice at client: p50 {percentile(v2v, 50):.0f} ms, "
            f"p95 {percentile(v2v, 95):.0f} ms, min {min(v2v):.0f}, max {max(v2v):.0f}"
        )
    vad = [t.vad_end_s * 1000 for t in results.turns]
    print(f"end of speech -> speech_stopped at client: p50 {percentile(vad, 50):.0f} ms")
    playout = [t.playout_s * 1000 for t in results.turns if t.playout_s is not None]
    if playout:
        print(
            f"first frame sent (delta event) -> voice heard: p50 {percentile(playout, 50):.0f} ms"
        )
    silences = [t.longest_silence_s * 1000 for t in results.turns if t.longest_silence_s]
    if silences:
        print(
            f"longest silence inside a reply: p50 {percentile(silences, 50):.0f} ms, "
            f"max {max(silences):.0f} ms"
        )
    waits = [wait * 1000 for t in results.turns for wait in t.waits_s]
    if waits:
        print(
            f"silence at a join beyond the text's pause ({len(waits)} joins): p50 "
            f"{percentile(waits, 50):.0f} ms, p95 {percentile(waits, 95):.0f}, max {max(waits):.0f}"
        )
    print("server stages, ms from the end of speech (p50 / p95):")
    for stage in STAGES:
        values = [t.timings_ms[stage] for t in results.turns if stage in t.timings_ms]
        if values:
            print(f"  {stage:18s} {statistics.median(values):7.0f} {percentile(values, 95):7.0f}")
    if cpu_pct is not None:
        print(f"server CPU: {cpu_pct:.0f}% of one core")


def llm_flags(llm_url: str | None) -> list[str]:
    """Server flags for an external LLM; its CPU is not in the server CPU figures."""
    return ["--llm-base-url", llm_url] if llm_url else []


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--sessions", type=int, default=1)
    parser.add_argument("--turns", type=int, default=3, help="turns per session")
    parser.add_argument("--url", help="measure a running server instead of starting one")
    parser.add_argument("--agent", default="llm", choices=["llm", "echo"])
    parser.add_argument("--silence-ms", type=int, default=500)
    parser.add_argument(
        "--llm-url",
        help="the agent's LLM: an OpenAI-compatible server such as vLLM "
        "(http://127.0.0.1:8001/v1 under `make vllm`); default: embedded llama.cpp",
    )
    parser.add_argument(
        "--longer", action="store_true", help="ask 3-4 s questions instead of 1-2 s ones"
    )
    parser.add_argument("server_args", nargs="*", help="extra flags for the server, after --")
    args = parser.parse_args(argv)

    folder = Path(tempfile.mkdtemp(prefix="bench-"))
    wavs = prompt_wavs(folder, LONGER if args.longer else None)

    server = None
    if args.url:
        url, pid = args.url, None
    else:
        server = ServerProcess(
            ["--agent", args.agent, "--max-sessions", str(max(args.sessions, 1)),
             "--vad-silence-ms", str(args.silence_ms), *llm_flags(args.llm_url),
             *args.server_args],
            folder / "server.log",
        )  # fmt: skip
        server.wait_healthy()
        url, pid = server.url, server.proc.pid
    llm = args.llm_url or "embedded llama.cpp"
    print(f"server: {url} agent={args.agent} silence_ms={args.silence_ms} llm={llm}")
    try:
        asyncio.run(measure(url, pid, args.sessions, args.turns, wavs))
    finally:
        if server:
            server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
