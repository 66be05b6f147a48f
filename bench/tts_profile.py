"""Where Kokoro's time goes: onnxruntime's own profiler over the bundled model, for clauses
of a few words to a sentence, by part of the graph (its top-level module: text encoder,
predictor, decoder...) and by operator. How much of a short first clause is fixed cost
is what says whether a faster graph or a streamed decoder pays.

    python -m bench.tts_profile [--runs 5] [--threads 2] [--optimization extended]

It prints milliseconds per synthesis (median of --runs, after a warm-up); it asserts
nothing. Our phonemizer (Japanese, other languages) is timed apart from the graph; for
English kokoro-onnx phonemizes inside, in "the rest".
"""

from __future__ import annotations

import argparse
import collections
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from app.config import TtsSettings
from app.engines.tts import OPTIMIZATION, Phonemizer, Reading, bundled_model_files
from bench import machine

CLAUSES = {
    2: "Sure thing.",
    4: "Paris is the capital.",
    8: "The meeting starts tomorrow at nine in the morning.",
    12: "The train to the airport leaves every fifteen minutes from the central station.",
    20: "The train to the airport leaves every fifteen minutes from the central station, "
    "and the ride takes about half an hour.",
}


def part_of(node: str) -> str:
    """A node's top-level module in the exported graph ("/decoder/generator/...": decoder)."""
    parts = [p for p in node.split("/") if p]
    return parts[0] if len(parts) > 1 else "(top level)"


def seconds_of(kokoro: Any, reading: Reading, voice: str) -> float:
    """Synthesize once, as the server does; the audio's length in seconds."""
    samples, rate = kokoro.create(reading.text, voice=voice, lang=reading.lang,
                                  is_phonemes=reading.is_phonemes)  # fmt: skip
    return len(samples) / rate


def profiled(model: str, voices: str, threads: int, level: str, runs: int) -> None:
    import onnxruntime
    from kokoro_onnx import Kokoro

    settings = TtsSettings()
    phonemize = Phonemizer(settings.lang)
    folder = tempfile.mkdtemp(prefix="kokoro-profile-")
    for words, text in CLAUSES.items():
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads
        options.graph_optimization_level = getattr(onnxruntime.GraphOptimizationLevel, level)
        options.enable_profiling = True
        options.profile_file_prefix = f"{folder}/w{words}"
        session = onnxruntime.InferenceSession(model, sess_options=options)
        kokoro = Kokoro.from_session(session, voices)
        started = time.perf_counter()
        reading = phonemize(text, "")
        phonemize_ms = (time.perf_counter() - started) * 1000

        spoken = (kokoro, reading, settings.voice)
        seconds_of(*spoken)  # warm-up: its events are dropped below
        walls = []
        for _ in range(runs):
            started = time.perf_counter()
            audio_s = seconds_of(*spoken)
            walls.append((time.perf_counter() - started) * 1000)
        events = json.loads(Path(session.end_profiling()).read_text())
        runs_seen = [e for e in events if e.get("name") == "model_run"]
        first_counted = runs_seen[1]["ts"] if len(runs_seen) > 1 else 0
        by_part: collections.Counter[str] = collections.Counter()
        by_op: collections.Counter[str] = collections.Counter()
        for event in events:
            if event.get("cat") != "Node" or not event["name"].endswith("_kernel_time"):
                continue
            if event["ts"] < first_counted:
                continue
            ms = event["dur"] / 1000 / runs
            by_part[part_of(event["name"].removesuffix("_kernel_time"))] += ms
            by_op[event["args"].get("op_name", "?")] += ms
        wall = statistics.median(walls)
        rtf = wall / 1000 / audio_s
        print(f"\n{words:>2} words, {audio_s:.2f} s of audio: {wall:.0f} ms a synthesis "
              f"(RTF {rtf:.2f}); our phonemizer {phonemize_ms:.1f} ms")  # fmt: skip
        kernels = sum(by_part.values())
        print(f"   kernels {kernels:.0f} ms; the rest (kokoro-onnx: its phonemizer where ours "
              "had none, copies; the session) "
              f"{wall - kernels:.0f} ms")  # fmt: skip
        print("   by part: " + ", ".join(f"{p} {ms:.0f}" for p, ms in by_part.most_common(8)))
        print("   by op:   " + ", ".join(f"{o} {ms:.0f}" for o, ms in by_op.most_common(10)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--optimization", choices=sorted(OPTIMIZATION), default="extended")
    args = parser.parse_args()
    model, voices = bundled_model_files()
    print(machine())
    print(f"model {model}; {args.threads} threads, optimization {args.optimization}")
    profiled(model, voices, args.threads, OPTIMIZATION[args.optimization], args.runs)


if __name__ == "__main__":
    main()
