"""A session's own configuration: it starts from the server's settings, and a client
may change instructions, the voice and its speed, turn detection and transcript
reporting for its session only."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Literal, TypeVar

from pydantic import ValidationError

from app.agent.responders import Responder
from app.config import LimitsSettings, Settings, VadSettings
from app.config.audio import NoiseReduction
from app.session.refusals import OptionError
from app.tools.specs import TOOL_LIST, McpSpec, ToolSet, tool_set
from app.vocab.chat import Tool, ToolChoice
from app.vocab.languages import AUTO, ENGLISH, unknown_language
from app.vocab.speech import TurnModel

T = TypeVar("T")

# How the prompt keeps within llm.max_history_messages: a ratio drops to that fraction
# of the limit at once, so the prompt's start moves rarely (the LLM's prefix cache keeps
# working); "auto" is half (history.AUTO_RETENTION); "disabled" fails the reply instead
# of dropping anything.
Truncation = Literal["auto", "disabled"] | float
# semantic_vad: how long a silence may last before the turn ends whatever the turn
# model says (OpenAI's documented maximum waits).
Eagerness = Literal["low", "medium", "high", "auto"]
MAX_WAIT_MS: dict[Eagerness, int] = {"low": 8000, "medium": 4000, "high": 2000, "auto": 4000}


@dataclass(frozen=True, slots=True)
class TurnDetectionChange:
    """Changes to automatic turn detection; None leaves a value as it is.

    Changing the kind (silence or the turn model) starts from the server's settings.
    """

    semantic: bool | None = None  # True: the turn model decides (semantic_vad)
    eagerness: Eagerness | None = None  # semantic only
    silence_ms: int | None = None  # server_vad only
    prefix_padding_ms: int | None = None
    aggressiveness: int | None = None  # webrtcvad mode 0..3
    interrupt_response: bool | None = None
    create_response: bool | None = None
    idle_timeout_ms: int | None = None  # 0: off


@dataclass(frozen=True, slots=True)
class OptionChanges:
    """What a client asked to change; None leaves a value as it is."""

    instructions: str | None = None
    voice: str | None = None
    speed: float | None = None
    manual_turns: bool = False  # turns end only when the client commits
    turn_detection: TurnDetectionChange | None = None  # turns end by VAD, with these changes
    transcription: bool | None = None  # report the user's transcripts
    text_only: bool | None = None  # replies in text, without audio
    max_output_tokens: int | Literal["inf"] | None = None  # "inf": the server's llm.max_tokens
    truncation: Truncation | None = None
    logprobs: bool | None = None  # a score per word of the user's transcripts
    tools: tuple[Tool, ...] | None = None  # OpenAI chat tools the agent may call
    # MCP servers the client names (given with `tools`: the two replace the client's own).
    servers: tuple[McpSpec, ...] | None = None
    tool_choice: ToolChoice | None = None
    noise_reduction: NoiseReduction | None = None  # "off": none
    language: str | None = None  # what the user speaks: a Whisper code, or "auto"


@dataclass(frozen=True, slots=True)
class SessionOptions:
    instructions: str
    voice: str
    speed: float
    vad: VadSettings | None  # None: turns end only when the client commits
    create_response: bool  # answer each turn; False: transcribe and keep it only
    transcription: bool
    text_only: bool = False
    max_output_tokens: int | None = None  # None: the server's llm.max_tokens
    truncation: Truncation = "auto"
    logprobs: bool = False
    idle_timeout_ms: int = 0  # after a reply, silence this long asks for another; 0: off
    eagerness: Eagerness | None = None  # semantic_vad; None: turns end by silence alone
    tools: tuple[Tool, ...] = ()
    # MCP servers this server calls for the session: the operator's (tools.default, for
    # the whole session) and the client's.
    servers: tuple[McpSpec, ...] = ()
    tool_choice: ToolChoice = "auto"
    noise_reduction: NoiseReduction = "off"  # for the turn detector's ears
    language: str = ENGLISH  # what the user speaks: a Whisper code, or "auto" to detect it

    @property
    def semantic(self) -> bool:
        return self.eagerness is not None

    @classmethod
    def from_settings(cls, settings: Settings) -> SessionOptions:
        vad, eagerness = settings.vad, None
        if settings.turn.detection == "semantic_vad":
            eagerness = settings.turn.eagerness
            vad = _with_turns(vad, TurnDetectionChange(), MAX_WAIT_MS[eagerness])
        defaults = operator_tools(settings)
        return cls(
            instructions=settings.llm.system_prompt,
            voice=settings.tts.voice,
            speed=settings.tts.speed,
            vad=vad,
            create_response=True,
            transcription=True,
            eagerness=eagerness,
            noise_reduction=settings.audio.noise_reduction,
            language=settings.stt.language,
            tools=defaults.functions,
            servers=defaults.servers,
        )

    def changed(
        self,
        changes: OptionChanges,
        *,
        voices: tuple[str, ...],
        base_vad: VadSettings,
        languages: frozenset[str] = frozenset(),
        writes_text: bool = True,
        semantic_ok: bool = True,
        limits: LimitsSettings | None = None,
    ) -> SessionOptions:
        """These options with `changes` applied, or OptionError; never half of them.

        `voices`: what the voice may be (empty: anything); `languages`: what the user
        may speak (empty: anything). `base_vad`: what turn
        detection starts from when it is switched on. `writes_text`: replies can be
        text only. `semantic_ok`: a turn model is loaded. `limits`: how long the
        instructions and how many and how large the tools may be.
        """
        if limits is not None:
            _within(changes, limits)
        if changes.voice is not None and voices and changes.voice not in voices:
            raise OptionError(
                f"unknown voice {changes.voice!r}; available: {', '.join(voices)}", "voice"
            )
        if changes.language is not None:
            _check_language(changes.language, languages)
        if changes.text_only and not writes_text:
            raise OptionError("this agent only plays back what it hears", "output_modalities")
        tools = self.tools if changes.tools is None else changes.tools
        servers = (
            self.servers
            if changes.servers is None
            else _with_operators(self.servers, changes.servers)
        )
        tool_choice = _given(changes.tool_choice, self.tool_choice)
        if isinstance(tool_choice, dict):
            names = {tool["function"]["name"] for tool in tools}
            if tool_choice.get("function", {}).get("name") not in names:
                raise OptionError(
                    "tool_choice names a function that is not in tools", "tool_choice"
                )
        vad, create_response = self.vad, self.create_response
        idle_timeout_ms, eagerness = self.idle_timeout_ms, self.eagerness
        if changes.manual_turns:
            vad, idle_timeout_ms, eagerness = None, 0, None
        elif changes.turn_detection is not None:
            turns = changes.turn_detection
            semantic = self.semantic if turns.semantic is None else turns.semantic
            if semantic and not semantic_ok:
                raise OptionError(
                    "semantic_vad needs the turn model, which is not loaded", "turn_detection"
                )
            same_kind = vad is not None and semantic == self.semantic
            if not same_kind:
                vad, idle_timeout_ms, eagerness = base_vad, 0, None
            assert vad is not None
            if semantic:
                eagerness = turns.eagerness or eagerness or "auto"
                vad = _with_turns(vad, turns, MAX_WAIT_MS[eagerness])
            else:
                vad = _with_turns(vad, turns)
                idle_timeout_ms = _given(turns.idle_timeout_ms, idle_timeout_ms)
            create_response = _given(turns.create_response, create_response)
        return dataclasses.replace(
            self,
            instructions=_given(changes.instructions, self.instructions),
            voice=_given(changes.voice, self.voice),
            speed=_given(changes.speed, self.speed),
            vad=vad,
            create_response=create_response,
            transcription=_given(changes.transcription, self.transcription),
            text_only=_given(changes.text_only, self.text_only),
            max_output_tokens=_token_limit(changes.max_output_tokens, self.max_output_tokens),
            truncation=_given(changes.truncation, self.truncation),
            logprobs=_given(changes.logprobs, self.logprobs),
            idle_timeout_ms=idle_timeout_ms,
            eagerness=eagerness,
            tools=tools,
            servers=servers,
            tool_choice=tool_choice,
            noise_reduction=_given(changes.noise_reduction, self.noise_reduction),
            language=_given(changes.language, self.language),
        )


def operator_tools(settings: Settings) -> ToolSet:
    """The operator's tools.default (checked when the settings were read)."""
    return tool_set(TOOL_LIST.validate_python(settings.tools.default), operator=True)


def _with_operators(
    current: tuple[McpSpec, ...], given: tuple[McpSpec, ...]
) -> tuple[McpSpec, ...]:
    """The client's servers replace its own; the operator's stay for the whole session."""
    kept = tuple(spec for spec in current if spec.operator)
    taken = {spec.label for spec in kept}
    for spec in given:
        if spec.label in taken:
            raise OptionError(
                f"server_label {spec.label!r} is taken by this server's own tools", "tools"
            )
    return kept + given


def _check_language(language: str, languages: frozenset[str]) -> None:
    if problem := unknown_language(language):
        raise OptionError(problem, "language")
    if languages and language not in languages and language != AUTO:
        raise OptionError(
            f"this server's Whisper hears only {', '.join(sorted(languages))}, not "
            f"{language!r}: its operator can start it with --stt-language auto",
            "language",
        )


def _given(value: T | None, current: T) -> T:
    return current if value is None else value


def _token_limit(change: int | Literal["inf"] | None, current: int | None) -> int | None:
    if change is None:
        return current
    return None if change == "inf" else change


def _with_turns(
    base: VadSettings, change: TurnDetectionChange, max_wait_ms: int | None = None
) -> VadSettings:
    """`max_wait_ms` (semantic_vad): the silence that ends a turn whatever the model says."""
    updates: dict[str, object] = {}
    # Durations snap to whole VAD frames.
    silence_ms = max_wait_ms or change.silence_ms
    if silence_ms is not None:
        updates["silence_ms"] = round(silence_ms / base.frame_ms) * base.frame_ms
    if change.prefix_padding_ms is not None:
        updates["prefix_padding_ms"] = (
            round(change.prefix_padding_ms / base.frame_ms) * base.frame_ms
        )
    if change.aggressiveness is not None:
        updates["aggressiveness"] = change.aggressiveness
    if change.interrupt_response is not None:
        updates["interrupt_response"] = change.interrupt_response
    try:
        return VadSettings.model_validate({**base.model_dump(), **updates})
    except ValidationError as exc:
        raise OptionError(exc.errors()[0]["msg"], "turn_detection") from exc


def _within(changes: OptionChanges, limits: LimitsSettings) -> None:
    if changes.instructions is not None and len(changes.instructions) > limits.instructions_chars:
        raise OptionError(
            f"instructions of {len(changes.instructions)} characters are over this server's "
            f"{limits.instructions_chars}",
            "instructions",
        )
    if changes.tools is None:
        return
    count = len(changes.tools) + len(changes.servers or ())
    if count > limits.tools:
        raise OptionError(f"{count} tools are more than this server's {limits.tools}", "tools")
    for tool in changes.tools:
        size = len(json.dumps(tool))
        if size > limits.tool_bytes:
            name = tool["function"]["name"]
            raise OptionError(
                f"tool {name!r} is {size} bytes of JSON, over this server's {limits.tool_bytes}",
                "tools",
            )


def changed_options(
    options: SessionOptions,
    changes: OptionChanges,
    settings: Settings,
    responder: Responder | None,
    turn_model: TurnModel | None,
) -> SessionOptions:
    """`options` with `changes` applied, as a session answered by `responder` (None: not
    loaded yet, so any voice) may take them; OptionError otherwise, and nothing changes."""
    return options.changed(
        changes,
        voices=responder.voices if responder is not None else (),
        languages=responder.languages if responder is not None else frozenset(),
        base_vad=settings.vad,
        writes_text=responder is None or responder.answers_text,
        semantic_ok=turn_model is not None,
        limits=settings.limits,
    )
