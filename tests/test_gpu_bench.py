"""bench/gpu.py: its CPU fallback measured for real, and its refusal to run without CUDA."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from bench import gpu
from bench.latency import run_concurrent
from tests.support.server import REPO, free_port
from tests.support.speech import have_espeak


@pytest.mark.e2e
def test_the_cpu_fallback_prints_one_row_per_session_count(
    capsys: pytest.CaptureFixture[str],
) -> None:
    if not have_espeak():
        pytest.skip("espeak-ng is not installed (make test installs it)")
    rows = gpu.run(["--device", "cpu", "--sessions", "1", "2", "--turns", "1"])

    assert [row.sessions for row in rows] == [1, 2]
    for row in rows:
        assert row.failed == 0, row.failures
        assert row.turns == row.completed == row.sessions
        for column in (*gpu.STAGES, gpu.V2V):
            figure = row.figures[column]
            assert figure is not None, column
            p50, p95 = figure
            assert 0 <= p50 <= p95 < 120_000, (column, figure)
    printed = capsys.readouterr().out
    assert printed.startswith("machine: ") and "gpu: " in printed.splitlines()[0]
    assert "CPUExecutionProvider" in printed and "on cpu/int8" in printed
    table = [line for line in printed.splitlines() if line.startswith("| ")]
    assert table[0].startswith("| sessions | turns | failed | stt_done |")
    assert [line.split(" | ")[0] for line in table[1:]] == ["| 1", "| 2"]


@pytest.mark.skipif(shutil.which("nvidia-smi") is not None, reason="this machine has a GPU")
def test_cuda_without_a_gpu_stops_and_says_what_is_missing() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bench.gpu", "--sessions", "1"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert done.returncode != 0
    assert "nvidia-smi is not on PATH" in done.stderr
    assert "CTranslate2 sees no CUDA device" in done.stderr
    assert "bench/gpu_setup.sh" in done.stderr
    assert "--device cpu" in done.stderr
    assert "| sessions" not in done.stdout  # nothing was measured


async def test_a_caller_that_fails_costs_its_turns_not_the_run() -> None:
    failures: list[str] = []
    nobody = f"http://127.0.0.1:{free_port()}"  # no server: every offer fails
    run = await run_concurrent(nobody, None, 2, 3, [], session=gpu.tolerant(failures))
    row = gpu.summarize(2, 3, run.results, failures)

    assert (row.turns, row.completed, row.failed) == (6, 0, 6)
    assert sorted(failure.split(":")[0] for failure in row.failures) == ["caller 0", "caller 1"]
    assert gpu.table([row]).splitlines()[-1] == "| 2 | 6 | 6 | - | - | - | - | - |"
