"""How many sessions one process holds before reply latency degrades.

    python -m bench.capacity                 # echo agent, then the embedded agent
    python -m bench.capacity --agent echo --max 8
    python -m bench.capacity --agent llm --llm-url http://127.0.0.1:8001/v1   # vLLM as the LLM
    python -m bench.capacity --agent llm -- --tts-graph shipped   # server flags after --

For each agent it runs 1, 2, 3, ... concurrent sessions (each speaking
`--turns` utterances) until voice-to-voice p50 exceeds `--degrade` times the
one-session figure, and prints per step: p50/p95, server CPU per session and RSS
per session. In echo mode the CPU figure is the media path alone (Opus decode,
resample, VAD, resample, Opus encode, pacing), and it first holds calls open to print
CPU per call and calls held per core over WebRTC and over SIP/RTP (bench.media). It
prints figures; it asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from pathlib import Path

from bench import machine, media
from bench.latency import PROMPTS, llm_flags, percentile, run_concurrent
from bench.media import phone_microphone
from tests.support.server import ServerProcess, free_udp_port
from tests.support.speech import speak_to_wav


async def step(
    url: str, pid: int, sessions: int, turns: int, wavs: list[Path]
) -> tuple[float, float, float, float]:
    run = await run_concurrent(url, pid, sessions, turns, wavs)
    v2v = [t.v2v_s * 1000 for t in run.results.turns if t.v2v_s is not None]
    assert run.cpu_pct is not None and run.rss_mb is not None
    return percentile(v2v, 50), percentile(v2v, 95), run.cpu_pct, run.rss_mb


async def sweep(url: str, pid: int, args: argparse.Namespace, wavs: list[Path]) -> None:
    base_p50 = base_rss = 0.0
    print("sessions   p50 ms   p95 ms  CPU %/session  RSS MB  +MB/extra session")
    for sessions in range(1, args.max + 1):
        p50, p95, cpu_pct, rss = await step(url, pid, sessions, args.turns, wavs)
        if sessions == 1:
            base_p50, base_rss = p50, rss
        extra = (rss - base_rss) / (sessions - 1) if sessions > 1 else 0.0
        print(
            f"{sessions:>8} {p50:>8.0f} {p95:>8.0f} {cpu_pct / sessions:>14.1f} "
            f"{rss:>7.0f} {extra:>18.1f}"
        )
        if p50 > args.degrade * base_p50:
            print(f"-> degraded at {sessions} sessions (p50 > {args.degrade}x the 1-session p50)")
            return
    print(f"-> held {args.max} sessions without degrading")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--agent", choices=["echo", "llm", "both"], default="both")
    parser.add_argument("--max", type=int, default=6, help="most concurrent sessions to try")
    parser.add_argument("--turns", type=int, default=2)
    parser.add_argument("--degrade", type=float, default=1.5)
    parser.add_argument(
        "--llm-url",
        help="the agent's LLM: an OpenAI-compatible server such as vLLM "
        "(http://127.0.0.1:8001/v1 under `make vllm`); default: embedded llama.cpp",
    )
    parser.add_argument("server_args", nargs="*", help="extra flags for the server, after --")
    args = parser.parse_args(argv)
    print(machine())
    folder = Path(tempfile.mkdtemp(prefix="capacity-"))
    wavs = []
    for i, text in enumerate(PROMPTS):
        speak_to_wav(text, folder / f"prompt{i}.wav")
        wavs.append(folder / f"prompt{i}.wav")
    for agent in ["echo", "llm"] if args.agent == "both" else [args.agent]:
        server = ServerProcess(
            [
                "--agent",
                agent,
                "--max-sessions",
                str(args.max),
                *llm_flags(args.llm_url),
                "--sip-port",
                str(free_udp_port()),
                *args.server_args,
            ],  # fmt: skip
            folder / f"{agent}.log",
        )
        server.wait_healthy()
        print(f"\n== agent={agent} llm={args.llm_url or 'embedded llama.cpp'}")
        try:
            if agent == "echo":
                counts = sorted({1, min(4, args.max), args.max})
                mic = phone_microphone(wavs[0], folder / "phone-mic.wav")
                print(media.HEADER)
                asyncio.run(media.measure(server, counts, wavs[0], mic, folder, "uvloop"))
            asyncio.run(sweep(server.url, server.proc.pid, args, wavs))
        finally:
            server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
