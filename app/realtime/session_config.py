"""The Realtime `session` object: what a client may set (session.update, or the
`session` part of a call) and how the server describes a session back.

Every field a current SDK sends is accepted. Those with a meaning here change
the session; the rest are listed in IGNORED, accepted and ignored. A field
that is neither is refused by name, so a typo does not pass silently.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, cast

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
)
from pydantic_core import PydanticCustomError

from app.config.audio import NoiseReduction as NoiseReductionKind
from app.events.audio import FormatName
from app.session.options import (
    OptionChanges,
    SessionOptions,
    Truncation,
    TurnDetectionChange,
)
from app.session.refusals import OptionError
from app.tools.specs import AnyTool, ToolSet, tool_set
from app.vocab.chat import Tool, ToolChoice
from app.vocab.languages import AUTO, unknown_language

RATE = 24_000  # audio/pcm: pcm16 mono
# The audio formats of a WebSocket's input_audio_buffer.append and audio deltas. G.711
# is 8 kHz, one byte a sample: what telephony gateways pass through.
FORMATS = ("audio/pcm", "audio/pcmu", "audio/pcma")
AudioFormatName = FormatName
# Where each session option sits in the session object, for errors.
PARAMS = {
    "voice": "session.audio.output.voice",
    "turn_detection": "session.audio.input.turn_detection",
    "output_modalities": "session.output_modalities",
    "instructions": "session.instructions",
    "tools": "session.tools",
    "tool_choice": "session.tool_choice",
    "response.tools": "response.tools",
    "response.tool_choice": "response.tool_choice",
    "language": "session.audio.input.transcription.language",
}
LOGPROBS = "item.input_audio_transcription.logprobs"
# Accepted for compatibility, without effect here (docs/reference/realtime-events.md).
IGNORED = (
    "model",
    "tracing",
    "prompt",
    "reasoning",
    "parallel_tool_calls",
    "audio.input.transcription.model / prompt / languages / keywords",
    "audio.input.turn_detection.model_version",
    "truncation.token_limits",
)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class _Open(BaseModel):
    """A sub-object passed through to OpenAI's own services, not read here."""

    model_config = ConfigDict(extra="allow")


class AudioFormat(_Strict):
    type: str
    rate: int | None = None


def _supported(format_: AudioFormat | None) -> AudioFormat | None:
    if format_ is None:
        return None
    rate = RATE if format_.type == "audio/pcm" else 8_000
    if format_.type not in FORMATS or format_.rate not in (None, rate):
        raise PydanticCustomError(
            "invalid_value",
            "audio formats are audio/pcm (pcm16 mono at 24000 Hz), audio/pcmu and audio/pcma "
            "(G.711 at 8000 Hz)",
        )
    return format_


SupportedFormat = Annotated[AudioFormat | None, AfterValidator(_supported)]


class ServerVad(_Strict):
    type: Literal["server_vad"] = "server_vad"
    threshold: float | None = Field(None, ge=0, le=1)
    prefix_padding_ms: int | None = Field(None, ge=0)
    silence_duration_ms: int | None = Field(None, ge=0)
    create_response: bool | None = None
    interrupt_response: bool | None = None
    idle_timeout_ms: int | None = Field(None, ge=1_000, le=3_600_000)
    model_version: str | None = None


class SemanticVad(_Strict):
    type: Literal["semantic_vad"]
    eagerness: Literal["low", "medium", "high", "auto"] | None = None
    create_response: bool | None = None
    interrupt_response: bool | None = None
    model_version: str | None = None


def _kind(detection: Any) -> str:
    """A turn_detection object without a type is server_vad, as it was before GA."""
    if isinstance(detection, dict):
        return str(detection.get("type", "server_vad"))
    return str(getattr(detection, "type", "server_vad"))


# Tags of the discriminated union below; pydantic puts them in error locations.
TURN_DETECTION_TAGS = ("server_vad", "semantic_vad")
TurnDetection = Annotated[
    Annotated[ServerVad, Tag("server_vad")] | Annotated[SemanticVad, Tag("semantic_vad")],
    Discriminator(
        _kind,
        custom_error_type="invalid_value",
        custom_error_message="turn_detection type must be server_vad or semantic_vad",
    ),
]


def _whisper_language(language: str | None) -> str | None:
    if language is not None and (problem := unknown_language(language)):
        raise PydanticCustomError("invalid_value", "{problem}", {"problem": problem})
    return language


class Transcription(_Open):
    """The language the user speaks (a Whisper code; "auto", an extension, detects it per
    utterance); the model and the rest are Whisper's here, as configured."""

    language: Annotated[str | None, AfterValidator(_whisper_language)] = None


class NoiseReduction(_Strict):
    type: Literal["near_field", "far_field"]


class AudioInput(_Strict):
    format: SupportedFormat = None
    transcription: Transcription | None = None
    turn_detection: TurnDetection | None = None
    noise_reduction: NoiseReduction | None = None


class AudioOutput(_Strict):
    format: SupportedFormat = None
    voice: str | None = None
    speed: float | None = Field(None, ge=0.5, le=2.0)


class Audio(_Strict):
    input: AudioInput | None = None
    output: AudioOutput | None = None


def client_tools(tools: Any) -> Any:
    """Function and mcp tools only, an mcp tool by URL only; a tool without a type is a
    function, as OpenAI's API takes it."""
    if not isinstance(tools, list):
        return tools
    typed = []
    for tool in tools:
        if isinstance(tool, dict):
            kind = tool.setdefault("type", "function")
            if kind not in ("function", "mcp"):
                raise PydanticCustomError(
                    "invalid_value",
                    "only function and mcp tools are supported here, not '{kind}'",
                    {"kind": kind},
                )
            if "command" in tool:
                raise PydanticCustomError(
                    "invalid_value", "a client's mcp tool names a server_url, not a command"
                )
        typed.append(tool)
    return typed


class NamedFunction(_Strict):
    type: Literal["function"]
    name: str


class RetentionRatio(_Strict):
    type: Literal["retention_ratio"]
    retention_ratio: float = Field(ge=0, le=1)
    token_limits: dict[str, Any] | None = None


def _one_modality(modalities: list[str] | None) -> list[str] | None:
    if modalities is not None and len(modalities) != 1:
        raise PydanticCustomError("invalid_value", "give one of ['audio'] or ['text']")
    return modalities


class SessionConfig(_Strict):
    type: Literal["realtime"] = "realtime"
    instructions: str | None = None
    output_modalities: Annotated[
        list[Literal["audio", "text"]] | None, AfterValidator(_one_modality)
    ] = None
    max_output_tokens: Annotated[int, Field(ge=1, le=4096)] | Literal["inf"] | None = None
    truncation: Literal["auto", "disabled"] | RetentionRatio | None = None
    include: list[Literal["item.input_audio_transcription.logprobs"]] | None = None
    audio: Audio | None = None
    # Accepted and ignored (IGNORED):
    model: str | None = None
    tracing: Literal["auto"] | dict[str, Any] | None = None
    prompt: dict[str, Any] | None = None
    reasoning: dict[str, Any] | None = None
    parallel_tool_calls: bool | None = None
    tools: Annotated[list[AnyTool] | None, BeforeValidator(client_tools)] = None
    tool_choice: Literal["auto", "none", "required"] | NamedFunction | None = None


def aggressiveness_for(threshold: float) -> int:
    """OpenAI's server_vad threshold (0..1, higher needs louder speech) onto webrtcvad's
    four modes: [0, .25) -> 0, [.25, .5) -> 1, [.5, .75) -> 2, [.75, 1] -> 3.
    The default 0.5 gives mode 2, the server's default."""
    return min(3, max(0, int(threshold * 4)))


def to_changes(config: SessionConfig) -> OptionChanges:
    audio = config.audio or Audio()
    audio_in = audio.input or AudioInput()
    audio_out = audio.output or AudioOutput()
    given = audio_in.model_fields_set
    given_tools = _tool_set(config.tools, "tools")
    return OptionChanges(
        instructions=config.instructions,
        voice=audio_out.voice,
        speed=audio_out.speed,
        manual_turns="turn_detection" in given and audio_in.turn_detection is None,
        turn_detection=_turns(audio_in.turn_detection),
        transcription=(audio_in.transcription is not None) if "transcription" in given else None,
        text_only=None
        if config.output_modalities is None
        else config.output_modalities == ["text"],
        max_output_tokens=config.max_output_tokens,
        truncation=_truncation(config.truncation),
        logprobs=None if config.include is None else LOGPROBS in config.include,
        tools=None if given_tools is None else given_tools.functions,
        servers=None if given_tools is None else given_tools.servers,
        tool_choice=_chat_tool_choice(config.tool_choice),
        noise_reduction=_noise_reduction(audio_in) if "noise_reduction" in given else None,
        language=audio_in.transcription.language if audio_in.transcription else None,
    )


def response_changes(
    tools: list[AnyTool] | None, tool_choice: str | NamedFunction | None
) -> OptionChanges | None:
    """A response's own tools and tool_choice (response.create), as changes to the
    session's options for that response alone; None where it has neither."""
    if tools is None and tool_choice is None:
        return None
    given = _tool_set(tools, "response.tools")
    choice = _chat_tool_choice(tool_choice)
    if choice is None and given is not None:
        choice = "auto"  # not the session's, which may force a function this one lacks
    return OptionChanges(
        tools=None if given is None else given.functions,
        servers=None if given is None else given.servers,
        tool_choice=choice,
    )


def _tool_set(tools: list[AnyTool] | None, where: str) -> ToolSet | None:
    try:
        return None if tools is None else tool_set(tools)
    except ValueError as exc:
        raise OptionError(str(exc), where) from None


def _noise_reduction(audio_in: AudioInput) -> NoiseReductionKind:
    """null turns it off; absent leaves it as it is."""
    return audio_in.noise_reduction.type if audio_in.noise_reduction is not None else "off"


def _chat_tool_choice(choice: str | NamedFunction | None) -> ToolChoice | None:
    if isinstance(choice, NamedFunction):
        return {"type": "function", "function": {"name": choice.name}}
    return choice


def _realtime_tool(tool: Tool) -> dict[str, Any]:
    function = tool["function"]
    return {"type": "function", **function}


def _realtime_tool_choice(choice: ToolChoice) -> str | dict[str, Any]:
    if isinstance(choice, dict):
        return {"type": "function", "name": choice["function"]["name"]}
    return choice


def _turns(vad: ServerVad | SemanticVad | None) -> TurnDetectionChange | None:
    if vad is None:
        return None
    if isinstance(vad, SemanticVad):
        return TurnDetectionChange(
            semantic=True,
            eagerness=vad.eagerness,
            interrupt_response=vad.interrupt_response,
            create_response=vad.create_response,
        )
    return TurnDetectionChange(
        semantic=False,
        silence_ms=vad.silence_duration_ms,
        prefix_padding_ms=vad.prefix_padding_ms,
        aggressiveness=None if vad.threshold is None else aggressiveness_for(vad.threshold),
        interrupt_response=vad.interrupt_response,
        create_response=vad.create_response,
        idle_timeout_ms=0
        if "idle_timeout_ms" in vad.model_fields_set and vad.idle_timeout_ms is None
        else vad.idle_timeout_ms,
    )


def _truncation(value: Literal["auto", "disabled"] | RetentionRatio | None) -> Truncation | None:
    if isinstance(value, RetentionRatio):
        return value.retention_ratio
    return value


def formats(config: SessionConfig) -> tuple[AudioFormatName | None, AudioFormatName | None]:
    """The (input, output) audio formats a session.update asks for; None: unchanged."""
    audio = config.audio or Audio()
    return _format_name(audio.input), _format_name(audio.output)


def _format_name(part: AudioInput | AudioOutput | None) -> AudioFormatName | None:
    if part is None or part.format is None:
        return None
    return cast(AudioFormatName, part.format.type)  # checked by _supported


def format_object(name: str) -> dict[str, Any]:
    return {"type": name, "rate": RATE} if name == "audio/pcm" else {"type": name}


def describe(
    options: SessionOptions,
    session_id: str,
    model: str,
    audio_formats: tuple[str, str] = ("audio/pcm", "audio/pcm"),
) -> dict[str, Any]:
    """The GA `realtime.session` object."""
    detection: dict[str, Any] | None = None
    if options.vad is not None and options.eagerness is not None:
        detection = {
            "type": "semantic_vad",
            "eagerness": options.eagerness,
            "create_response": options.create_response,
            "interrupt_response": options.vad.interrupt_response,
        }
    elif options.vad is not None:
        detection = {
            "type": "server_vad",
            "threshold": options.vad.aggressiveness / 4,
            "prefix_padding_ms": options.vad.prefix_padding_ms,
            "silence_duration_ms": options.vad.silence_ms,
            "create_response": options.create_response,
            "interrupt_response": options.vad.interrupt_response,
            "idle_timeout_ms": options.idle_timeout_ms or None,
        }
    truncation: Any = options.truncation
    if isinstance(truncation, float):
        truncation = {"type": "retention_ratio", "retention_ratio": truncation}
    return {
        "type": "realtime",
        "object": "realtime.session",
        "id": session_id,
        "model": model,
        "output_modalities": ["text"] if options.text_only else ["audio"],
        "instructions": options.instructions,
        "max_output_tokens": options.max_output_tokens or "inf",
        "truncation": truncation,
        "include": [LOGPROBS] if options.logprobs else None,
        "tools": [_realtime_tool(tool) for tool in options.tools]
        + [spec.to_realtime() for spec in options.servers],
        "tool_choice": _realtime_tool_choice(options.tool_choice),
        "audio": {
            "input": {
                "format": format_object(audio_formats[0]),
                "turn_detection": detection,
                "transcription": {
                    "model": "whisper",
                    "language": None if options.language == AUTO else options.language,
                }
                if options.transcription
                else None,
                "noise_reduction": None
                if options.noise_reduction == "off"
                else {"type": options.noise_reduction},
            },
            "output": {
                "format": format_object(audio_formats[1]),
                "voice": options.voice,
                "speed": options.speed,
            },
        },
    }
