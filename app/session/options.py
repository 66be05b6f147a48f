"""A session's own configuration, changed by `session.update`, described in its events.

Starts from the server's settings; a client may change instructions, the voice
and its speed, turn detection and transcription for its session only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from app.config import Settings, VadSettings

INPUT_FORMAT = {"type": "audio/pcm", "rate": 24000}
OUTPUT_FORMAT = {"type": "audio/pcm", "rate": 24000}


class OptionError(ValueError):
    """A session.update the server cannot honour; `param` names the field."""

    def __init__(self, message: str, param: str) -> None:
        super().__init__(message)
        self.param = param


def aggressiveness_for(threshold: float) -> int:
    """OpenAI's server_vad threshold (0..1, higher needs louder speech) onto webrtcvad's
    four modes: [0, .25) -> 0, [.25, .5) -> 1, [.5, .75) -> 2, [.75, 1] -> 3.
    The default 0.5 gives mode 2, the server's default."""
    return min(3, max(0, int(threshold * 4)))


def _snap(ms: Any, frame_ms: int, param: str) -> int:
    if not isinstance(ms, int) or isinstance(ms, bool) or ms < 0:
        raise OptionError(f"{param} must be a non-negative integer", param)
    return round(ms / frame_ms) * frame_ms


@dataclass(slots=True)
class SessionOptions:
    instructions: str
    voice: str
    speed: float
    vad: VadSettings | None  # None: turns end only when the client commits
    create_response: bool
    transcription: bool  # send the user's transcript events
    voices: tuple[str, ...] = ()  # what `voice` may be; empty means anything

    @classmethod
    def from_settings(cls, settings: Settings, voices: tuple[str, ...] = ()) -> SessionOptions:
        return cls(
            instructions=settings.llm.system_prompt,
            voice=settings.tts.voice,
            speed=settings.tts.speed,
            vad=settings.vad,
            create_response=True,
            transcription=True,
            voices=voices,
        )

    def update(self, session: dict[str, Any]) -> None:
        """Apply a session.update's `session`; all or nothing."""
        if not isinstance(session, dict):
            raise OptionError("session must be an object", "session")
        staged = SessionOptions(
            self.instructions,
            self.voice,
            self.speed,
            self.vad,
            self.create_response,
            self.transcription,
            self.voices,
        )
        if "instructions" in session:
            if not isinstance(session["instructions"], str):
                raise OptionError("instructions must be a string", "session.instructions")
            staged.instructions = session["instructions"]
        audio = session.get("audio") or {}
        if not isinstance(audio, dict):
            raise OptionError("audio must be an object", "session.audio")
        staged._update_output(audio.get("output") or {})
        staged._update_input(audio.get("input") or {})
        for name in self.__slots__:
            setattr(self, name, getattr(staged, name))

    def _update_output(self, output: dict[str, Any]) -> None:
        if "format" in output and output["format"] != OUTPUT_FORMAT:
            raise OptionError(
                "only audio/pcm at 24000 Hz is supported for output",
                "session.audio.output.format",
            )
        if "voice" in output:
            voice = output["voice"]
            if not isinstance(voice, str) or (self.voices and voice not in self.voices):
                raise OptionError(
                    f"unknown voice {voice!r}; available: {', '.join(self.voices)}",
                    "session.audio.output.voice",
                )
            self.voice = voice
        if "speed" in output:
            speed = output["speed"]
            if not isinstance(speed, int | float) or not 0.5 <= speed <= 2.0:
                raise OptionError(
                    "speed must be a number from 0.5 to 2.0", "session.audio.output.speed"
                )
            self.speed = float(speed)

    def _update_input(self, audio_in: dict[str, Any]) -> None:
        if "format" in audio_in and audio_in["format"] != INPUT_FORMAT:
            raise OptionError(
                "only audio/pcm (pcm16 mono) at 24000 Hz is supported for input",
                "session.audio.input.format",
            )
        if "transcription" in audio_in:
            self.transcription = audio_in["transcription"] is not None
        if "turn_detection" in audio_in:
            self._update_turns(audio_in["turn_detection"])

    def _update_turns(self, detection: Any) -> None:
        param = "session.audio.input.turn_detection"
        if detection is None:
            self.vad = None
            return
        if not isinstance(detection, dict) or detection.get("type", "server_vad") != "server_vad":
            raise OptionError("turn_detection must be null or {type: 'server_vad', ...}", param)
        base = self.vad or VadSettings()
        changes: dict[str, Any] = {}
        if "silence_duration_ms" in detection:
            changes["silence_ms"] = _snap(
                detection["silence_duration_ms"], base.frame_ms, f"{param}.silence_duration_ms"
            )
        if "prefix_padding_ms" in detection:
            changes["prefix_padding_ms"] = _snap(
                detection["prefix_padding_ms"], base.frame_ms, f"{param}.prefix_padding_ms"
            )
        if "threshold" in detection:
            threshold = detection["threshold"]
            if not isinstance(threshold, int | float) or not 0 <= threshold <= 1:
                raise OptionError("threshold must be a number from 0 to 1", f"{param}.threshold")
            changes["aggressiveness"] = aggressiveness_for(threshold)
        if "interrupt_response" in detection:
            changes["interrupt_response"] = bool(detection["interrupt_response"])
        if "create_response" in detection:
            self.create_response = bool(detection["create_response"])
        try:
            self.vad = VadSettings.model_validate({**base.model_dump(), **changes})
        except ValidationError as exc:
            raise OptionError(exc.errors()[0]["msg"], param) from exc

    def describe(self, session_id: str, model: str) -> dict[str, Any]:
        """The GA `realtime.session` object."""
        detection: dict[str, Any] | None = None
        if self.vad is not None:
            detection = {
                "type": "server_vad",
                "threshold": self.vad.aggressiveness / 4,
                "prefix_padding_ms": self.vad.prefix_padding_ms,
                "silence_duration_ms": self.vad.silence_ms,
                "create_response": self.create_response,
                "interrupt_response": self.vad.interrupt_response,
            }
        return {
            "type": "realtime",
            "object": "realtime.session",
            "id": session_id,
            "model": model,
            "output_modalities": ["audio"],
            "instructions": self.instructions,
            "audio": {
                "input": {
                    "format": INPUT_FORMAT,
                    "turn_detection": detection,
                    "transcription": {"model": "whisper"} if self.transcription else None,
                },
                "output": {"format": OUTPUT_FORMAT, "voice": self.voice, "speed": self.speed},
            },
        }
