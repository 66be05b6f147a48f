"""The Realtime `session` object: what a client may set (session.update, or the
`session` part of a call) and how the server describes a session back.

Fields the server has no use for (tools, tracing, ...) are accepted and ignored.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field
from pydantic_core import PydanticCustomError

from app.session.options import OptionChanges, SessionOptions, TurnDetectionChange

RATE = 24_000  # pcm16 mono, both ways
PCM_FORMAT = {"type": "audio/pcm", "rate": RATE}
# Where each session option sits in the session object, for errors.
PARAMS = {
    "voice": "session.audio.output.voice",
    "turn_detection": "session.audio.input.turn_detection",
}


class _Lenient(BaseModel):
    model_config = ConfigDict(extra="ignore")


class AudioFormat(_Lenient):
    type: str
    rate: int | None = None


def _pcm_only(format_: AudioFormat | None) -> AudioFormat | None:
    if format_ is not None and (format_.type != "audio/pcm" or format_.rate not in (None, RATE)):
        raise PydanticCustomError(
            "invalid_value", "only audio/pcm (pcm16 mono) at 24000 Hz is supported"
        )
    return format_


def _server_vad_only(kind: str) -> str:
    if kind != "server_vad":
        raise PydanticCustomError(
            "invalid_value",
            "turn detection '{kind}' is not supported; use server_vad, or null for turns "
            "the client commits",
            {"kind": kind},
        )
    return kind


PcmFormat = Annotated[AudioFormat | None, AfterValidator(_pcm_only)]


class ServerVad(_Lenient):
    type: Annotated[str, AfterValidator(_server_vad_only)] = "server_vad"
    threshold: float | None = Field(None, ge=0, le=1)
    prefix_padding_ms: int | None = Field(None, ge=0)
    silence_duration_ms: int | None = Field(None, ge=0)
    create_response: bool | None = None
    interrupt_response: bool | None = None


class AudioInput(_Lenient):
    format: PcmFormat = None
    transcription: dict[str, Any] | None = None
    turn_detection: ServerVad | None = None


class AudioOutput(_Lenient):
    format: PcmFormat = None
    voice: str | None = None
    speed: float | None = Field(None, ge=0.5, le=2.0)


class Audio(_Lenient):
    input: AudioInput | None = None
    output: AudioOutput | None = None


class SessionConfig(_Lenient):
    type: str = "realtime"
    instructions: str | None = None
    audio: Audio | None = None


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
    vad = audio_in.turn_detection
    return OptionChanges(
        instructions=config.instructions,
        voice=audio_out.voice,
        speed=audio_out.speed,
        manual_turns="turn_detection" in given and vad is None,
        turn_detection=None
        if vad is None
        else TurnDetectionChange(
            silence_ms=vad.silence_duration_ms,
            prefix_padding_ms=vad.prefix_padding_ms,
            aggressiveness=None if vad.threshold is None else aggressiveness_for(vad.threshold),
            interrupt_response=vad.interrupt_response,
            create_response=vad.create_response,
        ),
        transcription=(audio_in.transcription is not None) if "transcription" in given else None,
    )


def describe(options: SessionOptions, session_id: str, model: str) -> dict[str, Any]:
    """The GA `realtime.session` object."""
    detection: dict[str, Any] | None = None
    if options.vad is not None:
        detection = {
            "type": "server_vad",
            "threshold": options.vad.aggressiveness / 4,
            "prefix_padding_ms": options.vad.prefix_padding_ms,
            "silence_duration_ms": options.vad.silence_ms,
            "create_response": options.create_response,
            "interrupt_response": options.vad.interrupt_response,
        }
    return {
        "type": "realtime",
        "object": "realtime.session",
        "id": session_id,
        "model": model,
        "output_modalities": ["audio"],
        "instructions": options.instructions,
        "audio": {
            "input": {
                "format": PCM_FORMAT,
                "turn_detection": detection,
                "transcription": {"model": "whisper"} if options.transcription else None,
            },
            "output": {"format": PCM_FORMAT, "voice": options.voice, "speed": options.speed},
        },
    }
