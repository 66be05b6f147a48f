"""The container files agree with the app, checked without Docker: every VOICE_* key they set
is a setting, health checks ask for real routes on the ports that listen, the agent reaches
vLLM under the name it serves, and the vLLM image runs the serve.sh the tests start."""

from __future__ import annotations

import json
import os
import re
import shlex
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml
from fastapi.testclient import TestClient
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from app.cli import _fields
from app.config import Settings
from app.main import create_app

REPO = Path(__file__).resolve().parents[1]
SERVE_SH = (REPO / "deploy" / "vllm" / "serve.sh").read_text()


# --- compose files: PyYAML plus Compose's !reset and !override tags -------------------------

RESET = object()
REPLACED = {"command", "entrypoint", "test"}


@dataclass(frozen=True)
class Override:
    value: Any


class ComposeLoader(yaml.SafeLoader):
    pass


def _override(loader: yaml.SafeLoader, node: yaml.Node) -> Override:
    if isinstance(node, yaml.MappingNode):
        return Override(loader.construct_mapping(node, deep=True))
    if isinstance(node, yaml.SequenceNode):
        return Override(loader.construct_sequence(node, deep=True))
    return Override(loader.construct_scalar(node))


ComposeLoader.add_constructor("!reset", lambda loader, node: RESET)
ComposeLoader.add_constructor("!override", _override)


def load_compose(name: str) -> dict[str, Any]:
    return yaml.load((REPO / name).read_text(), Loader=ComposeLoader)


def merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """Compose's merge of an override file: mappings merge key by key, sequences append
    (command, entrypoint and healthcheck's test are replaced), !override replaces and !reset
    removes. Compose also drops repeated ports and volumes; these tests need not."""
    out = dict(base)
    for key, value in over.items():
        if value is RESET:
            out.pop(key, None)
        elif isinstance(value, Override):
            out[key] = value.value
        elif isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        elif isinstance(value, list) and isinstance(out.get(key), list) and key not in REPLACED:
            out[key] = out[key] + value
        else:
            out[key] = value
    return out


def environment(service: dict[str, Any]) -> dict[str, str]:
    """A service's `environment`, in its mapping or its list form."""
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.split("=", 1) if "=" in item else (item, "") for item in env)
    return {key: str(value) for key, value in env.items()}


COMPOSE = {
    "cpu": load_compose("compose.yaml"),
    "gpu": merge(load_compose("compose.yaml"), load_compose("compose.gpu.yaml")),
}


# --- Dockerfiles ------------------------------------------------------------------------------


@dataclass
class Stage:
    name: str
    base: str
    instructions: list[tuple[str, str]]


def dockerfile_stages(path: Path) -> list[Stage]:
    """Instructions per stage, continuation lines joined and comments dropped."""
    stages: list[Stage] = []
    logical = ""
    for line in path.read_text().splitlines():
        if line.lstrip().startswith("#") or not line.strip():
            continue
        if line.endswith("\\"):
            logical += line[:-1]
            continue
        instruction, _, args = (logical + line).strip().partition(" ")
        logical = ""
        if instruction.upper() == "FROM":
            image, _, name = args.partition(" AS ")
            stages.append(Stage(name.strip() or str(len(stages)), image.strip(), []))
        else:
            stages[-1].instructions.append((instruction.upper(), args.strip()))
    return stages


def stage_chain(path: Path, target: str | None) -> list[tuple[str, str]]:
    """Every instruction that builds `target` (default: the last stage), its bases' first."""
    stages = {stage.name: stage for stage in dockerfile_stages(path)}
    stage = stages[target] if target else list(stages.values())[-1]
    chain = stage.instructions
    while stage.base in stages:
        stage = stages[stage.base]
        chain = stage.instructions + chain
    return chain


def last(chain: list[tuple[str, str]], instruction: str) -> str | None:
    found = [args for name, args in chain if name == instruction]
    return found[-1] if found else None


def image_env(chain: list[tuple[str, str]]) -> dict[str, str]:
    env: dict[str, str] = {}
    for name, args in chain:
        if name == "ENV":
            for item in shlex.split(args):
                key, _, value = item.partition("=")
                env[key] = value
    return env


def exec_form(args: str) -> list[str]:
    """The JSON array of an exec-form CMD, ENTRYPOINT or HEALTHCHECK ... CMD."""
    return json.loads(args[args.index("[") :])


AGENT_DOCKERFILE = REPO / "Dockerfile"
VLLM_DOCKERFILE = REPO / "deploy" / "vllm" / "Dockerfile"


# --- settings ---------------------------------------------------------------------------------


def setting_for(key: str) -> FieldInfo | None:
    """The Settings leaf `VOICE_SECTION__FIELD` sets, or None where there is none."""
    if not key.startswith("VOICE_"):
        return None
    model: type[BaseModel] = Settings
    *sections, leaf = key.removeprefix("VOICE_").lower().split("__")
    for section in sections:
        field = model.model_fields.get(section)
        annotation = field.annotation if field else None
        if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
            return None
        model = annotation
    field = model.model_fields.get(leaf)
    annotation = field.annotation if field else None
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return None  # a whole section, not a setting
    return field


def settings_under(monkeypatch: pytest.MonkeyPatch, env: dict[str, str]) -> Settings:
    """Settings as the process would read them from exactly `env`; also sets `env` here."""
    for key in [key for key in os.environ if key.startswith("VOICE_")]:
        monkeypatch.delenv(key)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    return Settings(_env_file=None)


def image_healthcheck(chain: list[tuple[str, str]]) -> list[str]:
    """The last HEALTHCHECK's command as compose writes one: ["CMD-SHELL", line] for the
    shell form, ["CMD", *args] for the exec form."""
    args = last(chain, "HEALTHCHECK") or ""
    command = args[args.index(" CMD ") + 5 :].strip()
    return ["CMD", *exec_form(command)] if command.startswith("[") else ["CMD-SHELL", command]


def health_argv(check: list[str]) -> list[str]:
    """What a health check runs, as the engine would split it. Podman's Docker API splits
    the exec form's arguments on spaces, so only the shell form, or arguments without
    spaces, run alike everywhere."""
    kind, *args = check
    if kind == "CMD-SHELL":
        (line,) = args
        return shlex.split(line)
    assert kind == "CMD" and not any(" " in arg for arg in args), check
    return args


def requested_url(monkeypatch: pytest.MonkeyPatch, check: list[str]) -> str:
    """Runs a `python -c` health check with urlopen stubbed; returns the URL it asks for."""
    command = health_argv(check)
    assert command[-3] in ("python", "python3") and command[-2] == "-c", command
    asked: list[str] = []
    monkeypatch.setattr(urllib.request, "urlopen", lambda url, **_: asked.append(url))
    exec(command[-1], {})
    assert len(asked) == 1
    return asked[0]


def health_before_loading(path: str) -> tuple[int, Any]:
    """GET `path` from app.main's app without its lifespan, so no engine loads."""
    answer = TestClient(create_app(Settings(_env_file=None)), base_url="http://localhost").get(path)
    return answer.status_code, answer.json()


# --- the tests --------------------------------------------------------------------------------


def test_setting_for_rejects_typos_and_sections() -> None:
    assert setting_for("VOICE_STT__DEVICE") is not None
    assert setting_for("VOICE_AGENT") is not None
    assert setting_for("VOICE_STT__DEVCE") is None
    assert setting_for("VOICE_SST__DEVICE") is None
    assert setting_for("VOICE_STT") is None
    assert setting_for("VOICE_AGENT__X") is None


@pytest.mark.parametrize("config", COMPOSE)
def test_compose_voice_keys_are_settings_with_valid_values(
    config: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, service in COMPOSE[config]["services"].items():
        env = {k: v for k, v in environment(service).items() if k.startswith("VOICE_")}
        unknown = [key for key in env if setting_for(key) is None]
        assert not unknown, f"{config} {name}: not settings: {unknown}"
        settings_under(monkeypatch, env)  # raises on a value the setting refuses


@pytest.mark.parametrize("name", ["compose.yaml", "compose.gpu.yaml"])
def test_voice_keys_interpolated_from_env_are_settings(name: str) -> None:
    """coturn takes the agent's TURN username and password from .env by ${...}."""
    used = set(re.findall(r"\$\{(VOICE_[A-Z0-9_]+)", (REPO / name).read_text()))
    assert {key for key in used if setting_for(key) is None} == set()


def test_env_example_keys_and_settings_match_both_ways() -> None:
    """(tests/test_config.py checks that .env.example is exactly what app.cli generates.)"""
    text = (REPO / ".env.example").read_text()
    documented = set(re.findall(r"^#?\s*(VOICE_[A-Z0-9_]+)=", text, re.M))
    leaves = {"VOICE_" + path.upper().replace(".", "__") for path, _ in _fields(Settings)}
    assert {key for key in documented if setting_for(key) is None} == set()
    assert leaves - documented == set()
    assert all(setting_for(key) is not None for key in leaves)


@pytest.mark.parametrize("config", COMPOSE)
def test_agent_healthchecks_ask_for_healthz_on_the_port_it_listens_on(
    config: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent = COMPOSE[config]["services"]["agent"]
    chain = stage_chain(AGENT_DOCKERFILE, agent["build"].get("target"))
    assert "--port" not in (last(chain, "CMD") or "")  # the port comes from the settings
    env = {**image_env(chain), **environment(agent)}
    port = settings_under(monkeypatch, env).server.port
    image_check = image_healthcheck(chain)
    for check in (agent["healthcheck"]["test"], image_check):
        url = requested_url(monkeypatch, check)
        assert url == f"http://127.0.0.1:{port}/healthz"
    status, body = health_before_loading(urlsplit(url).path)
    assert (status, body["status"]) == (503, "loading")


def vllm_port(service: dict[str, Any], env: dict[str, str]) -> int:
    """`--port` given to vllm serve, else serve.sh's VLLM_PORT and its default."""
    command = service.get("command") or []
    if "--port" in command:
        return int(command[command.index("--port") + 1])
    default = re.search(r"VLLM_PORT:-(\d+)", SERVE_SH)
    assert default
    return int(env.get("VLLM_PORT", default[1]))


def vllm_env(service: dict[str, Any]) -> dict[str, str]:
    """The official image sets none of serve.sh's variables; ours sets them in its ENV."""
    image = image_env(stage_chain(VLLM_DOCKERFILE, None)) if "build" in service else {}
    return {**image, **environment(service)}


@pytest.mark.parametrize("config", COMPOSE)
def test_vllm_healthcheck_asks_for_health_on_its_port(
    config: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    vllm = COMPOSE[config]["services"]["vllm"]
    env = vllm_env(vllm)
    monkeypatch.delenv("VLLM_PORT", raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    checks = [vllm["healthcheck"]["test"]]
    if "build" in vllm:  # our image's own HEALTHCHECK too
        checks.append(image_healthcheck(stage_chain(VLLM_DOCKERFILE, None)))
    for check in checks:
        url = requested_url(monkeypatch, check)
        assert url == f"http://127.0.0.1:{vllm_port(vllm, env)}/health"


@pytest.mark.parametrize("config", COMPOSE)
def test_agent_reaches_vllm_on_its_published_port_and_asks_which_model(config: str) -> None:
    services = COMPOSE[config]["services"]
    agent, vllm = services["agent"], services["vllm"]
    agent_env, env = environment(agent), vllm_env(vllm)
    # On the host's network, 127.0.0.1 is the host, where vLLM's port is published.
    assert agent["network_mode"] == "host"
    url = urlsplit(agent_env["VOICE_LLM__BASE_URL"])
    assert (url.hostname, url.path) == ("127.0.0.1", "/v1")
    assert f"127.0.0.1:{url.port}:{vllm_port(vllm, env)}" in vllm["ports"]
    # No model named: the agent asks vLLM's /v1/models and says the name it finds when
    # asked who it is, so vLLM serves under the model's own name, not an alias.
    assert "VOICE_LLM__MODEL" not in agent_env
    assert "--served-model-name" not in (vllm.get("command") or [])
    assert agent["depends_on"]["vllm"]["condition"] == "service_healthy"


def test_vllm_service_runs_the_serve_script_the_tests_start() -> None:
    vllm = COMPOSE["cpu"]["services"]["vllm"]
    assert {key: vllm["build"][key] for key in ("context", "dockerfile")} == {
        "context": ".",
        "dockerfile": "deploy/vllm/Dockerfile",
    }
    chain = stage_chain(VLLM_DOCKERFILE, None)
    assert exec_form(last(chain, "ENTRYPOINT") or "")[0].endswith("/deploy/vllm/serve.sh")
    assert "command" not in vllm  # serve.sh's own flags, as in the tests
    assert image_env(chain)["VLLM_HOST"] == "0.0.0.0"  # reachable through the published port
    assert '"serve.sh"' in (REPO / "tests" / "support" / "vllm.py").read_text()


@pytest.mark.parametrize("target", [None, "gpu"], ids=["default", "gpu"])
def test_agent_image_runs_as_a_user_with_a_healthcheck(target: str | None) -> None:
    chain = stage_chain(AGENT_DOCKERFILE, target)
    assert last(chain, "USER") not in (None, "root", "0")
    assert last(chain, "HEALTHCHECK")


def test_dockerignore_keeps_venvs_and_secrets_out() -> None:
    ignored = (REPO / ".dockerignore").read_text().split()
    assert {".venv", ".vllm", ".env", ".git"} <= set(ignored)


def test_the_gpu_image_and_the_gpu_bench_install_the_same_cuda_12_onnxruntime() -> None:
    # onnxruntime-gpu 1.27 and later pull CUDA 13 libraries; CTranslate2 4.x loads cuBLAS 12,
    # so both must stay on 1.26 until CTranslate2 moves.
    pin = re.compile(r'"onnxruntime-gpu\[cuda,cudnn\]==([0-9.*]+)"')
    image = pin.findall(AGENT_DOCKERFILE.read_text())
    bench = pin.findall((REPO / "bench" / "gpu_setup.sh").read_text())
    assert image == bench == ["1.26.*"]
