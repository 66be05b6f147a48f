"""A newcomer's first minutes: what `make run` and `python -m app` say, and do, when they
start, when the port is taken, for a flag mistyped, and what `python -m clients` prints."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from tests.support.server import REPO, ServerProcess, free_port


def run_app(
    *args: str, env: dict[str, str] | None = None, timeout_s: float = 60
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "app", *args], cwd=REPO, capture_output=True, text=True,
        timeout=timeout_s, env={**os.environ, **(env or {})},
    )  # fmt: skip


def test_a_port_in_use_is_one_clear_line_before_any_model_loads() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = run_app("--port", str(port))  # the real agent: it must not get to its models
    said = done.stdout + done.stderr
    assert done.returncode == 1
    assert f"cannot listen on 127.0.0.1:{port}" in said and "--port" in said, said
    assert "Traceback" not in said and "loaded" not in said, said
    assert len(said.strip().splitlines()) == 1, said


def test_the_ready_line_comes_once_the_server_takes_calls(echo_server: ServerProcess) -> None:
    log = echo_server.log_path.read_text()  # whole: the server is shared, its log long
    ready = f"ready: open http://127.0.0.1:{echo_server.port}"
    assert log.count(ready) == 1, log
    assert log.index("listening on") < log.index(ready)


def test_the_port_can_come_from_the_environment(tmp_path: Path) -> None:
    """No --port on the command line (make run without PORT): VOICE_SERVER__PORT holds."""
    port = free_port()
    with open(tmp_path / "log", "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "app", "--agent", "echo"], cwd=REPO, stdout=log,
            stderr=subprocess.STDOUT, env={**os.environ, "VOICE_SERVER__PORT": str(port)},
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.2)
        else:
            pytest.fail((tmp_path / "log").read_text())
    finally:
        proc.terminate()
        proc.wait(10)


@pytest.mark.parametrize(
    ("make_args", "wanted", "unwanted"),
    [
        ((), [], ["--port", "--host"]),
        (("PORT=8011", "HOST=0.0.0.0"), ["--host 0.0.0.0", "--port 8011"], []),
    ],
)
def test_make_run_passes_only_the_host_and_port_it_was_given(
    make_args: tuple[str, ...], wanted: list[str], unwanted: list[str]
) -> None:
    done = subprocess.run(
        ["make", "-n", "-W", "pyproject.toml", "run", *make_args], cwd=REPO, capture_output=True,
        text=True, timeout=30,
    )  # fmt: skip
    command = next(line for line in done.stdout.splitlines() if "-m app" in line)
    assert all(w in command for w in wanted) and not any(u in command for u in unwanted), command
    # make run installs what serving needs, not the tests' tools.
    assert "'.[embedded]'" in done.stdout and "embedded,dev" not in done.stdout, done.stdout


def test_a_mistyped_flag_gets_the_nearest_one() -> None:
    done = run_app("--llm-temprature", "0.5", "--maxsessions", "2")
    assert done.returncode == 2
    assert "--llm-temprature: did you mean --llm-temperature?" in done.stderr, done.stderr
    assert "--maxsessions: did you mean --max-sessions" in done.stderr, done.stderr


def test_help_fits_its_usage_on_a_line_and_says_what_every_flag_does() -> None:
    done = run_app("--help")
    assert done.returncode == 0
    usage = done.stdout.split("\n\n", 1)[0]
    assert usage.count("\n") == 0, usage
    assert "[JSON]" not in done.stdout
    for section in ("server", "pool", "limits", "vad", "stt", "llm", "tts", "sip"):
        assert f"\n{section} options:" in done.stdout, section


def test_clients_says_who_said_what(
    agent_server: ServerProcess, speech: Callable[[str], Path]
) -> None:
    wav = speech("What is the capital of France?")
    done = subprocess.run(
        [sys.executable, "-m", "clients", agent_server.url, str(wav)], cwd=REPO,
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    lines = done.stdout.splitlines()
    assert done.returncode == 0, done.stdout + done.stderr
    assert lines[0].startswith("you said:") and "capital" in lines[0].lower(), lines
    assert lines[1].startswith("agent said:") and len(lines[1]) > len("agent said:  x"), lines
    assert lines[2].startswith("latency:") and " ms " in lines[2], lines


def test_clients_to_a_dead_server_is_one_line(speech: Callable[[str], Path]) -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    done = subprocess.run(
        [sys.executable, "-m", "clients", dead, str(speech("Hello."))], cwd=REPO,
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 1
    assert done.stdout == "" and done.stderr.startswith(f"cannot reach the agent at {dead}")
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
