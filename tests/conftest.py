from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support.server import ServerProcess
from tests.support.speech import have_espeak, speak_to_wav


@pytest.fixture(scope="session")
def start_server(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Callable[..., ServerProcess]]:
    """Start `python -m app` with extra flags; every server is stopped at the end."""
    started: list[ServerProcess] = []

    def start(*args: str, env: dict[str, str] | None = None) -> ServerProcess:
        log = tmp_path_factory.mktemp("server") / "server.log"
        server = ServerProcess(list(args), log, env)
        started.append(server)
        server.wait_healthy()
        return server

    yield start
    for server in started:
        server.stop()


@pytest.fixture(scope="session")
def echo_server(start_server: Callable[..., ServerProcess]) -> ServerProcess:
    return start_server("--agent", "echo", "--max-sessions", "4")


@pytest.fixture(scope="session")
def agent_server(start_server: Callable[..., ServerProcess]) -> ServerProcess:
    """The real default agent: Whisper tiny.en, SmolLM2 via llama.cpp, Kokoro."""
    return start_server("--max-sessions", "2")


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
