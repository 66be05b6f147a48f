"""`docker compose up` for real: both images built, started and talked to.

These tests need a container engine, which `make compose-test` sets up (Docker where its
daemon answers, podman otherwise: deploy/containers/engine.sh) before it runs them with
VOICE_TEST_COMPOSE=require, so that a missing engine fails rather than skips. `make test`
runs them last, after the rest of the suite."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.support.compose import ENGINE_ENV, Compose
from tests.support.server import REPO

# What the tests saw, printed at the end of the run for a reader of the CI log.
EVIDENCE: list[str] = []


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    if os.environ.get("VOICE_TEST_COMPOSE") == "require":
        return
    skip = pytest.mark.skip(reason="needs a container engine: run `make compose-test`")
    for item in items:
        if "tests/compose/" in str(item.path):
            item.add_marker(skip)


@pytest.fixture(scope="session")
def stack() -> Iterator[Compose]:
    """The default compose.yaml (vLLM on CPUs and the agent), built, up and healthy."""
    if not ENGINE_ENV.exists():
        pytest.fail(f"no {ENGINE_ENV}: run deploy/containers/engine.sh (make compose-test does)")
    stack = Compose(REPO, "voice-agent-test")
    stack.down()  # whatever an interrupted run left
    stack.build()
    try:
        stack.up()
        EVIDENCE.append(
            f"built both images in {stack.timings['build']:.0f} s; healthy "
            f"{stack.timings['up']:.0f} s after `up`"
        )
        yield stack
    finally:
        stack.down()
        left = [*stack.containers(), *stack.volumes(), *stack.networks()]
        assert not left, f"`down --volumes` left {left}"


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if EVIDENCE:
        terminalreporter.section("docker compose")
        for line in EVIDENCE:
            terminalreporter.write_line(line)
