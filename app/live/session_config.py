"""A Live session's configuration: what `session.start` (or POST /live/sessions) may
set, what `session.update` may change, and the `SessionResource` told back.

Live fixes the model, the instructions, the voice and the audio format at start;
an update changes only delegation and triggers. Unknown fields are ignored, as in
the Realtime dialect. What this server accepts and ignores is listed in
docs/reference/live-events.md.
"""

from __future__ import annotations

import json
import time
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from app.config import LimitsSettings
from app.events.audio import SPOKEN_RATE, FormatName
from app.session.options import OptionChanges, SessionOptions
from app.tools.specs import McpSpec, McpTool, mcp_spec

# OpenAI's built-in Live voices: each is spoken in the server's own voice.
BUILT_IN_VOICES = frozenset({
    "alloy", "ash", "ballad", "beacon", "bossa", "cedar", "cinder", "coral", "delta", "echo",
    "gleam", "marin", "meridian", "quartz", "ripple", "sage", "shida", "shimmer", "stone",
    "tempo", "verse", "vesper", "willow",
})  # fmt: skip
MAX_INITIAL_ITEMS = 128
# The Live fields each option comes from, for errors that name one.
PARAMS = {"instructions": "session.instructions", "voice": "session.audio.output.voice"}


class _Part(BaseModel):
    model_config = ConfigDict(extra="ignore")


class AudioFormat(_Part):
    type: FormatName
    rate: int | None = None


class CustomVoice(_Part):
    id: str


class AudioOutput(_Part):
    voice: str | CustomVoice | None = None


class Audio(_Part):
    format: AudioFormat | None = None
    output: AudioOutput | None = None


class TextPart(_Part):
    text: str


class InitialItem(_Part):
    role: Literal["developer", "user", "assistant"]
    content: list[TextPart] = Field(min_length=1, max_length=1)


class ResponsesBackend(_Part):
    """Responses delegation's backend: run here, on the server's LLM."""

    model: str | None = None  # told back; the server's LLM answers
    instructions: str | None = None
    max_output_tokens: int | None = Field(default=None, ge=1)
    tools: list[dict[str, Any]] | None = None
    tool_choice: Literal["auto", "none", "required"] | dict[str, Any] | None = None


class Delegation(_Part):
    type: Literal["client", "responses", "decisions"]
    acknowledgement_delay_ms: int | None = Field(default=None, ge=0, le=60_000)
    responses: ResponsesBackend | None = None


class SessionConfig(_Part):
    """session.start's `session`: everything a Live session starts with."""

    model: str
    instructions: str | None = None
    audio: Audio | None = None
    input: Annotated[list[InitialItem], Field(max_length=MAX_INITIAL_ITEMS)] = []
    delegation: Delegation | None = None
    store: bool | None = None
    safety_identifier: str | None = None


class SessionUpdate(_Part):
    """session.update's `session`: delegation and triggers only."""

    delegation: Delegation | None = None


class StartProblem(ValueError):
    """A start config this server cannot take: the message, and the Live param at fault."""

    def __init__(self, message: str, param: str) -> None:
        super().__init__(message)
        self.param = param


# The tool the voice's LLM calls to hand a task over, in a session that names its
# delegation: to the client, or to the Responses backend run here.
DELEGATE = "delegate"
# It takes no arguments: the task is what the user asked. A small model told to write the
# task out ran on (SmolLM2 wrote "deploying.yml.yml.yml..." to its token limit).
DELEGATE_TOOL = {
    "type": "function",
    "function": {
        "name": DELEGATE,
        "description": "Hand the user's request to a helper who can look things up, check "
        "systems and take actions; the helper answers later.",
        "parameters": {"type": "object", "properties": {}},
    },
}


def to_changes(
    config: SessionConfig, voices: tuple[str, ...], limits: LimitsSettings
) -> OptionChanges:
    """The session options a start config asks for (StartProblem for what cannot be)."""
    delegation = config.delegation
    if delegation is not None:
        check_delegation(delegation, limits)
    voice = config.audio.output.voice if config.audio and config.audio.output else None
    return OptionChanges(
        instructions=config.instructions if (config.instructions or "").strip() else None,
        voice=_voice(voice, voices),
        # Only a session that names its delegation gets the tool: a small model offered
        # one hands over questions it could answer itself.
        tools=(DELEGATE_TOOL,) if delegation is not None else None,
        tool_choice="auto" if delegation is not None else None,
    )


def check_delegation(delegation: Delegation, limits: LimitsSettings) -> None:
    """StartProblem for a delegation this server cannot run."""
    if delegation.type == "decisions":
        raise StartProblem(
            "decisions delegation is not available on this server; use client or responses",
            "session.delegation.type",
        )
    if delegation.type == "responses":
        if delegation.responses is None:
            raise StartProblem(
                "responses delegation needs its backend: delegation.responses",
                "session.delegation.responses",
            )
        backend_tools(delegation.responses, limits)


def backend_tools(backend: ResponsesBackend, limits: LimitsSettings) -> list[dict[str, Any]]:
    """The backend's function tools as chat tools: StartProblem for any kind but those and
    `mcp` (a client's MCP server, by URL: see backend_servers), and for instructions or
    tools past the limits a session's own are held to."""
    where = "session.delegation.responses"
    if len(backend.instructions or "") > limits.instructions_chars:
        most = limits.instructions_chars
        raise StartProblem(f"the backend's instructions are over {most} characters",
                           f"{where}.instructions")  # fmt: skip
    if len(backend.tools or []) > limits.tools:
        raise StartProblem(f"the backend may have at most {limits.tools} tools", f"{where}.tools")
    tools = []
    for n, tool in enumerate(backend.tools or []):
        if tool.get("type") == "mcp":
            continue
        if tool.get("type") != "function" or not isinstance(tool.get("name"), str):
            raise StartProblem(
                "only function and mcp tools run on this server's backend, not "
                f"{tool.get('type')!r}",
                f"{where}.tools[{n}]",
            )
        if len(json.dumps(tool)) > limits.tool_bytes:
            raise StartProblem(f"a tool's definition is over {limits.tool_bytes} bytes of JSON",
                               f"{where}.tools[{n}]")  # fmt: skip
        function = {key: tool[key] for key in ("name", "description", "parameters") if key in tool}
        tools.append({"type": "function", "function": function})
    backend_servers(backend)
    return tools


def backend_servers(backend: ResponsesBackend) -> tuple[McpSpec, ...]:
    """The backend's MCP servers (StartProblem for one that is not a client's by URL).
    Whether the URL is allowed is the session's to say (ServerTools.refused)."""
    where = "session.delegation.responses.tools"
    specs = []
    for n, tool in enumerate(backend.tools or []):
        if tool.get("type") != "mcp":
            continue
        try:
            specs.append(mcp_spec(McpTool.model_validate(tool), operator=False))
        except (ValueError, ValidationError) as exc:
            why = exc.errors()[0]["msg"] if isinstance(exc, ValidationError) else str(exc)
            why = why.removeprefix("Value error, ")
            raise StartProblem(f"mcp tool: {why}", f"{where}[{n}]") from None
    labels = [spec.label for spec in specs]
    if len(set(labels)) != len(labels):
        raise StartProblem("two mcp tools have the same server_label", where)
    return tuple(specs)


def _voice(asked: str | CustomVoice | None, voices: tuple[str, ...]) -> str | None:
    name = asked.id if isinstance(asked, CustomVoice) else asked
    if name is None or name in BUILT_IN_VOICES:
        return None  # OpenAI's voices are spoken in the server's own
    if voices and name not in voices:
        raise StartProblem(
            f"unknown voice {name!r}; available: {', '.join(sorted(BUILT_IN_VOICES))} "
            f"(spoken in the server's voice) or this server's own: {', '.join(voices)}",
            "session.audio.output.voice",
        )
    return name


def audio_format(config: SessionConfig) -> tuple[FormatName, int]:
    """The WebSocket audio format a start config asks for: (name, rate)."""
    asked = config.audio.format if config.audio else None
    if asked is None:
        return "audio/pcm", SPOKEN_RATE
    if asked.type == "audio/pcm":
        if asked.rate not in (None, 16_000, SPOKEN_RATE):
            raise StartProblem(
                f"audio/pcm is taken at 16000 or 24000 Hz, not {asked.rate}",
                "session.audio.format.rate",
            )
        return "audio/pcm", asked.rate or SPOKEN_RATE
    if asked.rate not in (None, 8_000):
        raise StartProblem(
            f"{asked.type} is G.711 at 8000 Hz, not {asked.rate}", "session.audio.format.rate"
        )
    return asked.type, 8_000


SECRET_FIELDS = ("headers", "authorization")


def describe_delegation(delegation: Delegation | None) -> dict[str, Any] | None:
    if delegation is None:
        return None
    described = delegation.model_dump(exclude_none=True)
    if delegation.responses is not None:
        described["responses"] = delegation.responses.model_dump(exclude_none=True)
        described["responses"].setdefault("model", "server")
        # An MCP server's headers are the client's secrets: they go to that server only.
        described["responses"]["tools"] = [
            {k: v for k, v in tool.items() if k not in SECRET_FIELDS}
            for tool in described["responses"].get("tools") or []
        ]
    return described


def describe(
    options: SessionOptions,
    session_id: str,
    model: str,
    *,
    expires_at: float,
    audio_format: tuple[FormatName, int] | None,
    delegation: dict[str, Any] | None,
    initial: list[InitialItem],
    store: bool = False,
) -> dict[str, Any]:
    """The `SessionResource` of a Live session. `audio_format`: a WebSocket's (None over
    WebRTC, which negotiates its own)."""
    audio: dict[str, Any] = {"output": {"voice": options.voice}}
    if audio_format is not None:
        audio["format"] = {"type": audio_format[0], "rate": audio_format[1]}
    return {
        "id": session_id,
        "expires_at": int(expires_at),
        "model": model,
        "status": "active",
        "instructions": options.instructions,
        "audio": audio,
        "delegation": delegation,
        "input": [item.model_dump(exclude_none=True) for item in initial],
        "store": store,  # recorded: asked for, and the server keeps recordings
    }


def expiry(max_session_s: float) -> float:
    """When a session starting now expires, in Unix time."""
    return time.time() + max_session_s
