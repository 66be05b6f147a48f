from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from app.engines.llm_models import gguf_path
from tests.support.otlp import OtlpCollector
from tests.support.server import (
    LLM_CHOICES,
    PLUMBING_LLM,
    ServerProcess,
    free_port,
    free_udp_port,
)
from tests.support.speech import have_espeak, speak_to_wav


@contextlib.contextmanager
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., ServerProcess]]:
    """Start `python -m app` with extra flags; every server started is stopped on leaving."""
    started: list[ServerProcess] = []

    def start(*args: str, env: dict[str, str] | None = None) -> ServerProcess:
        log = tmp_path_factory.mktemp("server") / "server.log"
        if not any(arg.startswith(LLM_CHOICES) for arg in args):
            args = ("--llm-embedded", PLUMBING_LLM, *args)
        server = ServerProcess(list(args), log, env)
        started.append(server)
        server.wait_healthy()
        return server

    try:
        yield start
    finally:
        for server in started:
            server.stop()


# A server lives as long as what started it. Held to the end of the run, the ninety that
# tests start took 20 GB of the machine's 24 by the last tests, and the reclaim that
# followed stalled the floods' servers for a second (issue 48's recording flood).
@pytest.fixture
def start_server(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Callable[..., ServerProcess]]:
    """Servers for this test alone."""
    with servers(tmp_path_factory) as start:
        yield start


@pytest.fixture(scope="module")
def start_module_server(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Callable[..., ServerProcess]]:
    """Servers for a module's tests."""
    with servers(tmp_path_factory) as start:
        yield start


@pytest.fixture(scope="session")
def start_session_server(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Callable[..., ServerProcess]]:
    """Servers that tests across the run share."""
    with servers(tmp_path_factory) as start:
        yield start


@pytest.fixture(scope="session")
def shared_echo_server(start_session_server: Callable[..., ServerProcess]) -> ServerProcess:
    return start_session_server("--agent", "echo", "--max-sessions", "4")


@pytest.fixture
def echo_server(shared_echo_server: ServerProcess) -> ServerProcess:
    """The shared echo server once the test before has left it: on a busy machine its
    calls may still be ending (a slot drains, then frees), and a test that needs a slot
    would find the pool full."""
    pool: dict = {}
    with httpx.Client(timeout=10) as http:
        for _ in range(600):
            pool = http.get(f"{shared_echo_server.url}/v1/pool").json()
            if pool["in_use"] == 0:
                return shared_echo_server
            time.sleep(0.1)
    raise AssertionError(f"the shared echo server's calls never ended: {pool}")


@pytest.fixture(scope="session")
def otlp_collector() -> Iterator[OtlpCollector]:
    collector = OtlpCollector()
    yield collector
    collector.close()


@pytest.fixture(scope="session")
def agent_server(
    start_session_server: Callable[..., ServerProcess], otlp_collector: OtlpCollector
) -> ServerProcess:
    """The real agent: Whisper tiny.en, Qwen2.5-Coder-0.5B via llama.cpp (the quicker of
    the two bundled Qwen, tests/support/server.py), Kokoro. It answers SIP calls too, on
    its `sip_port`, and exports its traces to `otlp_collector`."""
    return start_session_server(
        "--max-sessions", "2", "--sip-port", str(free_udp_port()),
        "--server-otlp-endpoint", otlp_collector.url,
    )  # fmt: skip


@pytest.fixture(scope="session")
def steady_agent_server(start_session_server: Callable[..., ServerProcess]) -> ServerProcess:
    """The agent answering greedily: a test that checks what the model says with a tool's
    result gets the same answer every run (at 0.2 it used the result in 5 of 6)."""
    return start_session_server("--max-sessions", "2", "--llm-temperature", "0")


@pytest.fixture(scope="session")
def speech(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Path]:
    if not have_espeak():
        pytest.skip("espeak-ng is not installed (make test installs it)")
    folder = tmp_path_factory.mktemp("speech")
    cache: dict[str, Path] = {}

    def make(text: str) -> Path:
        if text not in cache:
            path = folder / f"utt{len(cache)}.wav"
            speak_to_wav(text, path)
            cache[text] = path
        return cache[text]

    return make


@pytest.fixture(scope="session")
def whisper() -> object:
    """A Whisper of the tests' own, to hear what the agent said."""
    from faster_whisper import WhisperModel

    from app.engines.stt import bundled_model_path

    return WhisperModel(bundled_model_path(), device="cpu", compute_type="int8")


@pytest.fixture(scope="session")
def multilingual_whisper() -> object:
    """Whisper base, to tell which language the agent answered in."""
    from faster_whisper import WhisperModel

    from app.engines.whisper_models import multilingual_model_path

    return WhisperModel(multilingual_model_path(), device="cpu", compute_type="int8")


@pytest.fixture(scope="session")
def multilingual_agent_server(start_session_server: Callable[..., ServerProcess]) -> ServerProcess:
    """The default agent for callers in any language: Whisper base detecting each
    utterance's language (--stt-language auto). It answers SIP calls too. Greedy, so its
    replies are the same every run: a short one ("Wie spät ist es?" said back) is too
    little for a Whisper to be sure of its language, as for a person."""
    # SmolLM2: the default Qwen2.5-Coder-0.5B answers in the caller's language too, but so
    # briefly ("Frankreich's Hauptstadt ist Berlin.") that the test's Whisper heard its
    # German as Indonesian; SmolLM2 says more, enough to tell.
    return start_session_server(
        "--max-sessions", "2", "--stt-language", "auto", "--llm-temperature", "0",
        "--llm-embedded", "smollm2-135m", "--sip-port", str(free_udp_port()),
    )  # fmt: skip


@dataclass(frozen=True)
class LlamaServer:
    url: str  # the OpenAI-compatible base URL, ending in /v1
    log: Path


# python -m llama_cpp.server, on the weights as they are where the CPU has AMX (avoid_amx).
LLAMA_SERVER = (
    "import runpy; from app.engines.llama import avoid_amx; avoid_amx(); "
    "runpy.run_module('llama_cpp.server', run_name='__main__', alter_sys=True)"
)


def _serve_llama(folder: Path, *extra: str) -> Iterator[LlamaServer]:
    port = free_port()
    log = folder / "server.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-c", LLAMA_SERVER, "--model", gguf_path("smollm2-135m"),
             "--host", "127.0.0.1", "--port", str(port), "--n_threads", "2", "--n_ctx", "2048",
             *extra],
            stdout=out, stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},  # its log is read while it runs
        )  # fmt: skip
    url = f"http://127.0.0.1:{port}/v1"
    try:
        for _ in range(300):
            try:
                if httpx.get(f"{url}/models", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.1)
        else:
            raise RuntimeError(f"llama_cpp.server did not start:\n{log.read_text()[-3000:]}")
        yield LlamaServer(url, log)
    finally:
        proc.terminate()
        proc.wait(10)


@pytest.fixture(scope="session")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    """`python -m llama_cpp.server`: a real OpenAI-compatible server, as vLLM would be."""
    yield from _serve_llama(tmp_path_factory.mktemp("llama-server"))


@pytest.fixture(scope="session")
def llama_tools_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    """The same with its function-calling chat format: streams OpenAI tool_calls."""
    folder = tmp_path_factory.mktemp("llama-tools-server")
    yield from _serve_llama(folder, "--chat_format", "chatml-function-calling")


@pytest.fixture
def openai_server(llama_server: LlamaServer) -> str:
    return llama_server.url
