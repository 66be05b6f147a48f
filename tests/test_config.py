from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from pydantic import ValidationError

from app.cli import ALIASES, _fields, env_example, flag, settings_from_args
from app.config import Settings

ENV_EXAMPLE = Path(__file__).resolve().parents[1] / ".env.example"


def test_defaults_are_the_embedded_agent() -> None:
    settings = Settings(_env_file=None)  # type: ignore[call-arg]
    assert settings.agent == "llm"
    assert settings.llm.base_url == ""
    assert settings.pool.max_sessions == 4
    assert settings.vad.silence_ms == 500


def test_environment_uses_nested_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VOICE_POOL__MAX_SESSIONS", "9")
    monkeypatch.setenv("VOICE_LLM__BASE_URL", "http://vllm:8000/v1")
    monkeypatch.setenv("VOICE_SERVER__ICE_SERVERS", "stun:a.example:3478, turn:b.example")
    settings = Settings(_env_file=None)  # type: ignore[call-arg]
    assert settings.pool.max_sessions == 9
    assert settings.llm.base_url == "http://vllm:8000/v1"
    assert settings.server.ice_servers == ["stun:a.example:3478", "turn:b.example"]


def test_turn_urls_carry_their_credential_and_stun_urls_do_not(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("VOICE_SERVER__ICE_SERVERS", "stun:a.example:3478, turn:b.example")
    monkeypatch.setenv("VOICE_SERVER__ICE_USERNAME", "voice")
    monkeypatch.setenv("VOICE_SERVER__ICE_CREDENTIAL", "s3cret")
    entries = Settings(_env_file=None).server.ice_config()  # type: ignore[call-arg]
    assert entries == [
        {"urls": "stun:a.example:3478"},
        {"urls": "turn:b.example", "username": "voice", "credential": "s3cret"},
    ]


def test_flags_override_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VOICE_SERVER__PORT", "9999")
    monkeypatch.setenv("VOICE_VAD__AGGRESSIVENESS", "1")
    settings = settings_from_args(
        ["--port", "8123", "--max-sessions", "2", "--vad-silence-ms", "400"]
    )
    assert settings.server.port == 8123
    assert settings.pool.max_sessions == 2
    assert settings.vad.silence_ms == 400
    assert settings.vad.aggressiveness == 1  # untouched by flags, still from env


def test_every_setting_is_a_flag(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each `--<section>-<field>` (and each short alias) sets its field: given a value
    other than the default, the parsed settings carry it."""
    defaults = Settings(_env_file=None)  # type: ignore[call-arg]
    for path, field in _fields(Settings):
        default = field.get_default(call_default_factory=True)
        value = OTHER_VALUES.get(path, _other(default))
        for name in (flag(path), *(["--" + ALIASES[path]] if path in ALIASES else [])):
            # A webhook is offered only to a server with its own key (the test of that
            # is tests/telephony/sip/test_incoming.py).
            keyed = ["--server-api-key", "k"] if path == "sip.webhook_url" else []
            parsed = settings_from_args([name, str(value), *keyed])
            expected = [value] if isinstance(default, list) else value
            expected = PARSED.get(path, expected)
            assert _get(parsed, path) == expected != _get(defaults, path), name


# Flag values that parse into something other than themselves (JSON).
TIME_TOOL = {"type": "mcp", "server_label": "clock", "command": ["mcp-server-time"]}
PARSED: dict[str, object] = {"tools.default": [TIME_TOOL]}

# Values the plain rule in _other() would make invalid.
OTHER_VALUES: dict[str, object] = {
    "tools.default": json.dumps([TIME_TOOL]),
    "tools.mcp_allowed_urls": "https://tools.example.com/mcp",
    "agent": "echo",
    "server.ice_servers": "stun:stun.example:3478",
    "sip.allow": "10.0.0.0/8",
    "sip.transfer_targets": "sip:*@pbx.example.com",
    "limits.trusted_proxies": "10.0.0.0/8",
    "tts.optimization": "all",
    "tts.graph": "shipped",
    "server.log_level": "debug",
    "server.event_loop": "asyncio",
    "limits.event_bytes": 65_536,
    "vad.frame_ms": 10,
    "vad.detector": "webrtcvad",
    "audio.noise_reduction": "far_field",
    "vad.aggressiveness": 3,
    "vad.interrupt_mode": "cancel",
    "stt.min_window_s": 20.0,
    "stt.language": "es",
    "llm.temperature": 0.5,
    "llm.repetition_penalty": 1.3,
    "llm.embedded": "smollm2-135m",
    "tts.speed": 1.5,
    "stt.beam_size": 2,
    "turn.detection": "semantic_vad",
    "turn.eagerness": "high",
    "turn.threshold": 0.7,
}


def _other(default: object) -> object:
    if isinstance(default, bool):
        return not default
    if isinstance(default, int | float):
        return default * 2 if default else 1
    return f"{default}-x" if default else "x"


def _get(settings: Settings, path: str) -> object:
    node: object = settings
    for part in path.split("."):
        node = getattr(node, part)
    return node


@pytest.mark.parametrize(
    "argv",
    [
        ["--port", "0"],
        ["--vad-aggressiveness", "4"],
        ["--agent", "parrot"],
        ["--vad-silence-ms", "505"],
    ],
)
def test_bad_values_are_rejected(argv: list[str]) -> None:
    with pytest.raises(ValidationError):
        settings_from_args(argv)


def test_env_example_documents_every_key_with_its_default() -> None:
    assert ENV_EXAMPLE.read_text() == env_example(), "regenerate: python -m app.cli > .env.example"
    documented = dict(re.findall(r"^(VOICE_[A-Z_]+)=(.*)$", ENV_EXAMPLE.read_text(), re.M))
    assert len(documented) == len(_fields(Settings))
    assert documented["VOICE_POOL__MAX_SESSIONS"] == "4"
