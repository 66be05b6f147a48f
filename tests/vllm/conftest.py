"""vLLM is started once per test session, and only if a test here runs.

Without .vllm (deploy/vllm/install.sh) these tests are skipped, except under `make test`,
which builds it and sets VOICE_TEST_VLLM=require so that a missing vLLM fails instead.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator

import pytest

from tests.support.server import ServerProcess
from tests.support.vllm import SERVED_NAME, VENV, VllmServer, vllm_installed

# What the tests saw vLLM do, printed at the end of the run for a reader of the CI log.
EVIDENCE: list[str] = []


@pytest.fixture(scope="session")
def vllm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[VllmServer]:
    if not vllm_installed():
        message = f"no vLLM in {VENV}: run `make vllm-setup`"
        if os.environ.get("VOICE_TEST_VLLM") == "require":
            pytest.fail(message)
        pytest.skip(message)
    server = VllmServer(tmp_path_factory.mktemp("vllm") / "vllm.log")
    server.start()
    EVIDENCE.append(
        f"vLLM {server.version()} (deploy/vllm/serve.sh) served {SERVED_NAME!r} at "
        f"{server.url}, healthy after {server.startup_s:.0f} s; log: {server.log_path}"
    )
    yield server
    server.stop()


@pytest.fixture(scope="session")
def vllm_agent(
    start_session_server: Callable[..., ServerProcess], vllm: VllmServer
) -> ServerProcess:
    """The default agent (Whisper, Kokoro) with vLLM as its LLM; 4 slots for the batching test.

    Patient with vLLM: on two AVX2 cores it serves the 1.5B in float32, where four replies
    at once failed within the 10 s a caller is kept waiting for a first word."""
    return start_session_server(
        "--llm-base-url", vllm.url, "--max-sessions", "4",
        "--llm-first-token-timeout-s", "90", "--llm-stall-timeout-s", "60",
    )  # fmt: skip


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if EVIDENCE:
        terminalreporter.section("real vLLM")
        for line in EVIDENCE:
            terminalreporter.write_line(line)
