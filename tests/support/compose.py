"""`docker compose` driven as an operator would, through whatever engine
deploy/containers/engine.sh set up (Docker, or podman behind its Docker API).

Every failure raises ComposeError carrying the engine's own words: the command's output,
and for a container that never became healthy, its health check's output and its log."""

from __future__ import annotations

import json
import os
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.server import REPO

ENGINE_ENV = REPO / "test-output" / "containers" / "env"


class ComposeError(RuntimeError):
    pass


def engine_env(path: Path = ENGINE_ENV) -> dict[str, str]:
    """The environment engine.sh wrote (`export KEY=value` lines) over this process's."""
    env = dict(os.environ)
    if path.exists():
        for line in path.read_text().splitlines():
            key, _, value = line.removeprefix("export ").partition("=")
            if key:
                env[key] = value
    return env


@dataclass
class Compose:
    """One compose project: `files` (relative to `folder`) under the project `name`."""

    folder: Path
    name: str
    files: tuple[str, ...] = ("compose.yaml",)
    env: dict[str, str] = field(default_factory=engine_env)
    timings: dict[str, float] = field(default_factory=dict)

    def run(self, *args: str, timeout_s: float = 600.0, step: str = "") -> str:
        """`docker compose ARGS`; its output, or ComposeError with that output."""
        command = ["docker", "compose", "-p", self.name]
        for name in self.files:
            command += ["-f", name]
        command += args
        started = time.monotonic()
        try:
            done = subprocess.run(
                command, cwd=self.folder, env=self.env, capture_output=True, text=True,
                timeout=timeout_s,
            )  # fmt: skip
        except subprocess.TimeoutExpired as exc:
            raise ComposeError(f"{' '.join(args)}: no end in {timeout_s:.0f} s") from exc
        if step:
            self.timings[step] = time.monotonic() - started
        output = done.stdout + done.stderr
        if done.returncode != 0:
            raise ComposeError(
                f"docker compose {' '.join(args)} failed ({done.returncode}):\n{output[-8000:]}"
            )
        return output

    def docker(self, *args: str, timeout_s: float = 60.0) -> str:
        done = subprocess.run(["docker", *args], env=self.env, capture_output=True, text=True,
                              timeout=timeout_s)  # fmt: skip
        if done.returncode != 0:
            raise ComposeError(f"docker {' '.join(args)} failed: {done.stdout}{done.stderr}")
        return done.stdout

    def build(self, timeout_s: float = 1800.0) -> None:
        self.run("build", timeout_s=timeout_s, step="build")

    def up(self, timeout_s: float = 900.0) -> None:
        """Start every service and wait until each health check passes; a container that
        turns unhealthy or exits fails it, with the check's output and the container's log."""
        try:
            self.run("up", "--detach", "--wait", "--wait-timeout", str(int(timeout_s)),
                     timeout_s=timeout_s + 60, step="up")  # fmt: skip
        except ComposeError as exc:
            raise ComposeError(f"{exc}\n{self.health_report()}") from None

    def containers(self) -> dict[str, str]:
        """Service name to container id, for every container of the project."""
        ids = self.run("ps", "--all", "--quiet").split()
        found = {}
        for info in json.loads(self.docker("inspect", *ids)) if ids else []:
            found[info["Config"]["Labels"]["com.docker.compose.service"]] = info["Id"]
        return found

    def health(self, service: str) -> dict[str, object]:
        """The engine's health record of `service`: Status, and Log with each check's output."""
        container = self.containers()[service]
        state = json.loads(self.docker("inspect", container))[0]["State"]
        return dict(state.get("Health") or {})

    def health_report(self) -> str:
        lines = []
        for service, container in self.containers().items():
            state = json.loads(self.docker("inspect", container))[0]["State"]
            health = state.get("Health") or {}
            lines.append(f"--- {service}: {state.get('Status')}, health {health.get('Status')}")
            for check in (health.get("Log") or [])[-3:]:
                lines.append(f"check exited {check.get('ExitCode')}: {check.get('Output')}")
            lines.append(self.logs(service, tail=40))
        return "\n".join(lines)

    def memory(self) -> dict[str, str]:
        """Service name to the engine's figure for its container's memory in use."""
        return {
            service: self.docker("stats", "--no-stream", "--format", "{{.MemUsage}}", container)
            .strip()
            .split(" / ")[0]
            for service, container in self.containers().items()
        }

    def logs(self, service: str, tail: int | None = None) -> str:
        args = ["logs", "--no-color"] + (["--tail", str(tail)] if tail else []) + [service]
        return self.run(*args)

    def down(self, *, images: bool = False) -> None:
        """Containers, networks and volumes removed; images too if `images`, else kept as
        the build cache."""
        args = ["--rmi", "local"] if images else []
        self.run("down", "--volumes", "--remove-orphans", "--timeout", "20", *args, step="down")

    def volumes(self) -> list[str]:
        return self._listed("volume")

    def networks(self) -> list[str]:
        return self._listed("network")

    def _listed(self, kind: str) -> list[str]:
        label = f"label=com.docker.compose.project={self.name}"
        return self.docker(kind, "ls", "--quiet", "--filter", label).split()
