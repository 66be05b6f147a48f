"""A real vLLM (CPU build from PyPI) for the tests, started by deploy/vllm/serve.sh: the same
script `make vllm` and the compose service run."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from pathlib import Path

import httpx

from tests.support.server import REPO, free_port

VENV = Path(os.environ.get("VLLM_VENV", REPO / ".vllm"))
SERVED_NAME = "Qwen2.5-Coder-1.5B-Instruct"


def vllm_installed() -> bool:
    return (VENV / "bin" / "vllm").exists()


class VllmServer:
    """One vLLM process at a time on a fixed port, so it can be stopped and started again."""

    def __init__(self, log_path: Path) -> None:
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.url = f"{self.base}/v1"  # what the agent's llm.base_url takes
        self.log_path = log_path
        self.proc: subprocess.Popen[bytes] | None = None
        self.startup_s = 0.0

    def start(self, timeout_s: float = 900.0) -> None:
        """Start serve.sh and wait for /health (about 45 s on 2 cores)."""
        started = time.monotonic()
        env = {**os.environ, "VLLM_VENV": str(VENV), "VLLM_PORT": str(self.port),
               "VLLM_SERVED_NAME": SERVED_NAME}  # fmt: skip
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                [str(REPO / "deploy" / "vllm" / "serve.sh")],
                stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True,
            )  # fmt: skip
        while time.monotonic() - started < timeout_s:
            if self.proc.poll() is not None:
                raise RuntimeError(f"vLLM exited ({self.proc.returncode}):\n{self.log(6000)}")
            try:
                if httpx.get(f"{self.base}/health", timeout=2).status_code == 200:
                    self.startup_s = time.monotonic() - started
                    return
            except httpx.HTTPError:
                pass
            time.sleep(1)
        self.stop()
        raise TimeoutError(f"vLLM not healthy in {timeout_s:.0f} s:\n{self.log(6000)}")

    def stop(self) -> None:
        """SIGTERM to the whole process group: the API server and its engine core."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.proc = None

    def log(self, tail: int | None = None) -> str:
        text = self.log_path.read_text(errors="replace")
        return text[-tail:] if tail else text

    def version(self) -> str:
        return str(httpx.get(f"{self.base}/version", timeout=5).json()["version"])

    def metric(self, name: str, **labels: str) -> float:
        """The sum of a /metrics series over the samples whose labels include `labels`."""
        text = httpx.get(f"{self.base}/metrics", timeout=5).text
        total, found = 0.0, False
        for match in re.finditer(rf"^{re.escape(name)}\{{([^}}]*)\}} (\S+)$", text, re.M):
            have = dict(re.findall(r'(\w+)="([^"]*)"', match.group(1)))
            if all(have.get(key) == value for key, value in labels.items()):
                total, found = total + float(match.group(2)), True
        if not found:
            raise KeyError(f"vLLM's /metrics has no {name} with {labels}")
        return total
