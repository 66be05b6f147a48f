"""A session's own configuration: it starts from the server's settings, and a client
may change instructions, the voice and its speed, turn detection and transcript
reporting for its session only."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TypeVar

from pydantic import ValidationError

from app.config import Settings, VadSettings
from app.session.refusals import OptionError

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class TurnDetectionChange:
    """Changes to automatic turn detection; None leaves a value as it is."""

    silence_ms: int | None = None
    prefix_padding_ms: int | None = None
    aggressiveness: int | None = None  # webrtcvad mode 0..3
    interrupt_response: bool | None = None
    create_response: bool | None = None


@dataclass(frozen=True, slots=True)
class OptionChanges:
    """What a client asked to change; None leaves a value as it is."""

    instructions: str | None = None
    voice: str | None = None
    speed: float | None = None
    manual_turns: bool = False  # turns end only when the client commits
    turn_detection: TurnDetectionChange | None = None  # turns end by VAD, with these changes
    transcription: bool | None = None  # report the user's transcripts


@dataclass(frozen=True, slots=True)
class SessionOptions:
    instructions: str
    voice: str
    speed: float
    vad: VadSettings | None  # None: turns end only when the client commits
    create_response: bool  # answer each turn; False: transcribe and keep it only
    transcription: bool

    @classmethod
    def from_settings(cls, settings: Settings) -> SessionOptions:
        return cls(
            instructions=settings.llm.system_prompt,
            voice=settings.tts.voice,
            speed=settings.tts.speed,
            vad=settings.vad,
            create_response=True,
            transcription=True,
        )

    def changed(
        self, changes: OptionChanges, *, voices: tuple[str, ...], base_vad: VadSettings
    ) -> SessionOptions:
        """These options with `changes` applied, or OptionError; never half of them.

        `voices`: what the voice may be (empty: anything). `base_vad`: what turn
        detection starts from when it is switched on.
        """
        if changes.voice is not None and voices and changes.voice not in voices:
            raise OptionError(
                f"unknown voice {changes.voice!r}; available: {', '.join(voices)}", "voice"
            )
        vad, create_response = self.vad, self.create_response
        if changes.manual_turns:
            vad = None
        elif changes.turn_detection is not None:
            vad = _with_turns(vad or base_vad, changes.turn_detection)
            if changes.turn_detection.create_response is not None:
                create_response = changes.turn_detection.create_response
        return dataclasses.replace(
            self,
            instructions=_given(changes.instructions, self.instructions),
            voice=_given(changes.voice, self.voice),
            speed=_given(changes.speed, self.speed),
            vad=vad,
            create_response=create_response,
            transcription=_given(changes.transcription, self.transcription),
        )


def _given(value: T | None, current: T) -> T:
    return current if value is None else value


def _with_turns(base: VadSettings, change: TurnDetectionChange) -> VadSettings:
    updates: dict[str, object] = {}
    # Durations snap to whole VAD frames.
    if change.silence_ms is not None:
        updates["silence_ms"] = round(change.silence_ms / base.frame_ms) * base.frame_ms
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
