"""Per-stage latency with the engines on an NVIDIA GPU, at 1, 8 and 32 concurrent sessions.

    bench/gpu_setup.sh     # once: CUDA 12 wheels into .venv, the models into models/
    python -m bench.gpu    # Whisper large-v3-turbo float16 and Kokoro v1.0 on CUDA
    python -m bench.gpu --llm-url http://127.0.0.1:8001/v1      # vLLM as the LLM
    python -m bench.gpu --device cpu --sessions 1 2 --turns 1   # same path, embedded CPU models

Starts the server once, with room for the largest session count, then for each count
runs that many aiortc callers at once (bench.latency's clients: each speaks espeak-ng
questions as its microphone and silence in between, and never hears the agent's voice
back, so no echo) and prints one table: p50 / p95 of the server's stages from
`response.done` (ms from the end of the user's speech), voice to voice at the client, and the
turns that failed. With --device cuda it checks CUDA first and stops, saying what is
missing, rather than measure the CPU. It prints figures; it asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from app.config import TtsSettings
from bench import machine
from bench.latency import (
    Caller,
    Results,
    llm_flags,
    percentile,
    prompt_wavs,
    run_concurrent,
    run_session,
)
from tests.support.server import REPO, ServerProcess, until_in_use

SETUP = "bench/gpu_setup.sh"
STAGES = ("stt_done", "llm_first_token", "tts_first_audio", "first_frame_sent")
V2V = "voice-to-voice"
# Where gpu_setup.sh puts the models.
MODELS = REPO / "models"
KOKORO_MODEL, KOKORO_VOICES = "kokoro-v1.0.onnx", "voices-v1.0.bin"


class NotReady(Exception):
    """Something the engines asked for is not here: CUDA, or a model file."""


@dataclass(frozen=True)
class Engines:
    """The engines the server is started with; empty paths mean the bundled models."""

    device: str
    stt_model: str
    compute_type: str
    tts_model: str
    tts_voices: str
    voice: str
    provider: str

    def flags(self) -> list[str]:
        # Flags, not VOICE_* variables: flags beat the environment and .env, so the run
        # measures exactly these engines.
        return [
            "--stt-model", self.stt_model, "--stt-device", self.device,
            "--stt-compute-type", self.compute_type,
            "--tts-model-path", self.tts_model, "--tts-voices-path", self.tts_voices,
            "--tts-voice", self.voice, "--tts-provider", self.provider,
        ]  # fmt: skip

    def files(self) -> list[str]:
        return [path for path in (self.stt_model, self.tts_model, self.tts_voices) if path]

    def describe(self) -> str:
        stt = self.stt_model or "bundled Whisper tiny.en"
        tts = self.tts_model or "bundled Kokoro-82M int8"
        return (
            f"stt {stt} on {self.device}/{self.compute_type}; "
            f"tts {tts}, voice {self.voice}, {self.provider}"
        )


def stt_path(name: str, models: Path) -> str:
    """A faster-whisper name as the folder gpu_setup.sh downloads it into; a path as is."""
    if not name or Path(name).exists():
        return name
    return str(models / f"faster-whisper-{name}")


def engines_for(args: argparse.Namespace) -> Engines:
    models = Path(args.models)
    if args.device == "cpu":
        # The embedded models unless others are named: the fallback runs anywhere.
        return Engines(
            device="cpu",
            stt_model=stt_path(args.stt_model or "", models),
            compute_type="int8",
            tts_model=args.tts_model or "",
            tts_voices=args.tts_voices or "",
            voice=args.tts_voice or TtsSettings().voice,
            provider="CPUExecutionProvider",
        )
    return Engines(
        device="cuda",
        stt_model=stt_path(args.stt_model or "large-v3-turbo", models),
        compute_type="float16",
        tts_model=args.tts_model or str(models / KOKORO_MODEL),
        tts_voices=args.tts_voices or str(models / KOKORO_VOICES),
        voice=args.tts_voice or "af_heart",
        provider="CUDAExecutionProvider",
    )


def cuda_libraries() -> list[str]:
    """The lib folders of the NVIDIA wheels (cuBLAS, cuDNN, ...) in this environment."""
    spec = importlib.util.find_spec("nvidia")
    roots = list(spec.submodule_search_locations or []) if spec else []
    return sorted(str(lib) for root in roots for lib in Path(root).glob("*/lib") if lib.is_dir())


def server_env(device: str) -> dict[str, str]:
    # Nothing is downloaded at run time: a model that is not on disk fails the start.
    env = {"HF_HUB_OFFLINE": "1"}
    if device == "cuda":
        # CTranslate2 and onnxruntime dlopen cuBLAS and cuDNN by name; the pip wheels put
        # them where the loader does not look, so the server is told where.
        paths = [*cuda_libraries(), os.environ.get("LD_LIBRARY_PATH", "")]
        env["LD_LIBRARY_PATH"] = ":".join(path for path in paths if path)
    return env


def missing_files(engines: Engines) -> list[str]:
    return [f"{path} is not there" for path in engines.files() if not Path(path).exists()]


def missing_cuda() -> list[str]:
    """What keeps the engines off CUDA here, in words; empty when nothing does."""
    import ctranslate2
    import onnxruntime

    missing = []
    if shutil.which("nvidia-smi") is None:
        missing.append("nvidia-smi is not on PATH (no NVIDIA driver)")
    if ctranslate2.get_cuda_device_count() == 0:
        missing.append("CTranslate2 sees no CUDA device (faster-whisper cannot use one)")
    if "CUDAExecutionProvider" not in onnxruntime.get_available_providers():
        missing.append(
            "onnxruntime has no CUDAExecutionProvider (onnxruntime-gpu is not installed; "
            f"it has {', '.join(onnxruntime.get_available_providers())})"
        )
    return missing


# onnxruntime only warns, and runs on the CPU, when its CUDA provider cannot load cuDNN or
# cuBLAS; so Kokoro's model is opened once, in the server's environment, to see.
PROBE = (
    "import sys, onnxruntime as ort; "
    "print(ort.InferenceSession(sys.argv[1], providers=['CUDAExecutionProvider'])"
    ".get_providers()[0])"
)


def kokoro_off_cuda(engines: Engines) -> list[str]:
    probe = subprocess.run(
        [sys.executable, "-c", PROBE, engines.tts_model],
        env={**os.environ, **server_env("cuda")},
        capture_output=True,
        text=True,
        timeout=300,
    )
    if probe.returncode == 0 and probe.stdout.split()[-1:] == ["CUDAExecutionProvider"]:
        return []
    said = (probe.stderr.strip().splitlines() or ["no error printed"])[-1]
    return [f"onnxruntime opened {engines.tts_model} off CUDA (cuDNN 9 or cuBLAS 12?): {said}"]


def preflight(engines: Engines) -> None:
    """Raise NotReady, naming each thing missing, instead of measuring something else."""
    missing = missing_cuda() if engines.device == "cuda" else []
    missing += missing_files(engines)
    if engines.device == "cuda" and not missing:
        missing += kokoro_off_cuda(engines)
    if missing:
        lines = "\n".join(f"  - {item}" for item in missing)
        raise NotReady(
            f"bench.gpu --device {engines.device} cannot run here:\n{lines}\n"
            f"Set it up once with: {SETUP}   (CUDA 12 wheels into .venv, models into models/)\n"
            "The same benchmark on the embedded CPU models: python -m bench.gpu --device cpu"
        )


def gpu_line() -> str:
    """The GPUs as nvidia-smi names them, for the machine line."""
    if shutil.which("nvidia-smi") is None:
        return "gpu: none (no nvidia-smi)"
    query = ["--query-gpu=name,memory.total,driver_version", "--format=csv,noheader"]
    out = subprocess.run(["nvidia-smi", *query], capture_output=True, text=True, timeout=30)
    gpus = [line.strip() for line in out.stdout.splitlines() if line.strip()]
    return f"gpu: {'; '.join(gpus) or out.stderr.strip()}"


@dataclass(frozen=True)
class Row:
    """One session count: p50 and p95 (ms) per stage and voice to voice, None where unseen."""

    sessions: int
    turns: int  # asked for: sessions x turns per session
    completed: int
    figures: dict[str, tuple[float, float] | None]
    failures: list[str] = field(default_factory=list)

    @property
    def failed(self) -> int:
        return self.turns - self.completed


def spread(values: list[float]) -> tuple[float, float] | None:
    return (percentile(values, 50), percentile(values, 95)) if values else None


def summarize(sessions: int, turns: int, results: Results, failures: list[str]) -> Row:
    done = [turn for turn in results.turns if turn.status == "completed"]
    figures = {
        stage: spread([turn.timings_ms[stage] for turn in done if stage in turn.timings_ms])
        for stage in STAGES
    }
    figures[V2V] = spread([turn.v2v_s * 1000 for turn in done if turn.v2v_s is not None])
    return Row(sessions, sessions * turns, len(done), figures, failures)


def tolerant(failures: list[str]) -> Caller:
    """run_session, where a client that fails leaves its turns failed instead of ending
    the run: one timeout among 32 callers should cost its turns, not the table."""

    async def caller(
        url: str,
        wavs: list[Path],
        turns: int,
        results: Results,
        index: int,
        hold: asyncio.Event | None = None,
    ) -> None:
        try:
            await run_session(url, wavs, turns, results, index, hold)
        except Exception as exc:  # noqa: BLE001 - every failure is reported in the table
            failures.append(f"caller {index}: {type(exc).__name__}: {exc}"[:300])
            # run_concurrent waits for every caller to finish its turns; one that failed
            # before (hold not yet set) still counts as finished.
            if hold is None or not hold.is_set():
                results.finish_one()

    return caller


async def step(url: str, pid: int, sessions: int, turns: int, wavs: list[Path]) -> Row:
    failures: list[str] = []
    run = await run_concurrent(url, pid, sessions, turns, wavs, session=tolerant(failures))
    # The next step claims every slot again: wait for these calls' slots to be freed.
    await until_in_use(url, 0, timeout_s=30)
    return summarize(sessions, turns, run.results, failures)


async def measure(url: str, pid: int, args: argparse.Namespace, wavs: list[Path]) -> list[Row]:
    if args.warmup:
        # The first replies pay one-time costs (CUDA kernels, allocator growth).
        warm = await step(url, pid, 1, args.warmup, wavs)
        print(f"warm-up: {warm.completed} of {warm.turns} turns (not in the table)")
    return [await step(url, pid, count, args.turns, wavs) for count in args.sessions]


def cell(figure: tuple[float, float] | None) -> str:
    return "-" if figure is None else f"{figure[0]:.0f} / {figure[1]:.0f}"


def table(rows: list[Row]) -> str:
    """A Markdown table, as the docs' are."""
    head = ["sessions", "turns", "failed", *STAGES, V2V]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in rows:
        cells = [str(row.sessions), str(row.turns), str(row.failed)]
        cells += [cell(row.figures[column]) for column in (*STAGES, V2V)]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def report(rows: list[Row]) -> None:
    print("\nms, p50 / p95: server stages from the end of speech; voice to voice at the client")
    print(table(rows))
    for row in rows:
        for failure in row.failures:
            print(f"failed at {row.sessions} sessions: {failure}")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.gpu",
        description=__doc__,
        formatter_class=argparse.RawTextHelpFormatter,
    )
    parser.add_argument("--sessions", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument("--turns", type=int, default=3, help="turns per session")
    parser.add_argument("--warmup", type=int, default=1, help="turns of one session first")
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    parser.add_argument(
        "--llm-url",
        help="an OpenAI-compatible LLM server such as vLLM; default: embedded llama.cpp",
    )
    parser.add_argument(
        "--stt-model",
        help="a faster-whisper folder, or a name downloaded into --models/faster-whisper-NAME "
        "(cuda default: large-v3-turbo; cpu default: the bundled tiny.en)",
    )
    parser.add_argument("--tts-model", help=f"Kokoro ONNX (cuda default: --models/{KOKORO_MODEL})")
    parser.add_argument("--tts-voices", help=f"voices (cuda default: --models/{KOKORO_VOICES})")
    parser.add_argument("--tts-voice", help="cuda default: af_heart; cpu: the bundled default")
    parser.add_argument("--models", default=str(MODELS), help="where gpu_setup.sh put them")
    parser.add_argument("server_args", nargs="*", help="extra flags for the server, after --")
    args = parser.parse_args(argv)
    if min(args.sessions) < 1 or args.turns < 1 or args.warmup < 0:
        parser.error("--sessions and --turns must be 1 or more, --warmup 0 or more")
    return args


def run(argv: list[str] | None = None) -> list[Row]:
    """The benchmark: print the machine, the engines and the table; return the rows."""
    args = parse_args(argv)
    engines = engines_for(args)
    preflight(engines)
    print(f"{machine()}; {gpu_line()}")
    print(f"engines: {engines.describe()}; llm {args.llm_url or 'embedded llama.cpp'}")
    folder = Path(tempfile.mkdtemp(prefix="bench-gpu-"))
    wavs = prompt_wavs(folder)
    server = ServerProcess(
        ["--max-sessions", str(max(args.sessions)), *engines.flags(), *llm_flags(args.llm_url),
         *args.server_args],
        folder / "server.log",
        server_env(engines.device),
    )  # fmt: skip
    try:
        server.wait_healthy(timeout_s=600)  # large-v3-turbo's first load on a GPU takes a while
        rows = asyncio.run(measure(server.url, server.proc.pid, args, wavs))
    finally:
        server.stop()
    report(rows)
    print(f"server log: {server.log_path}")
    return rows


def main(argv: list[str] | None = None) -> int:
    try:
        run(argv)
    except NotReady as exc:
        print(exc, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
