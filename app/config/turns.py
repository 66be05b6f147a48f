"""When the user is speaking, when they are done, and when they interrupt."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator, model_validator


class VadSettings(BaseModel):
    # Measured with espeak questions under pink and brown noise: Silero heard 80 of 80
    # down to 0 dB SNR (webrtcvad 61, 1 of 20 at 0 dB), and took noise alone for no turn.
    detector: Literal["silero", "webrtcvad"] = Field(
        "silero",
        description="What tells speech from silence: Silero (a small model, ~0.1 ms per "
        "32 ms of audio) holds up in noise down to 0 dB SNR, where webrtcvad loses 9 "
        "questions in 10. webrtcvad needs no model; calls use it when Silero cannot load.",
    )
    silero_model_path: str = Field(
        "", description="Silero VAD ONNX file. Empty: the one in the pipecat-ai package."
    )
    aggressiveness: int = Field(
        2, ge=0, le=3, description="detector webrtcvad: its mode, 0 (lenient) to 3."
    )
    frame_ms: Literal[10, 20, 30] = Field(20, description="Voice detection frame length.")
    # webrtcvad keeps saying "voiced" for ~80 ms after any burst, so a start must
    # outlast that hangover or every click becomes a turn.
    start_ms: int = Field(
        120, ge=10, description="Voiced audio in a row needed to confirm the user started speaking."
    )
    # 500 ms matches OpenAI's server_vad default, so Realtime clients behave as they
    # expect. Natural pauses between phrases run 200-400 ms; much lower cuts people off.
    silence_ms: int = Field(
        500,
        ge=100,
        le=10_000,
        description="Silence after speech that ends the user's turn (the voice detector's "
        "hangover counted in).",
    )
    prefix_padding_ms: int = Field(
        300, ge=0, le=2000, description="Audio kept from before the confirmed speech start."
    )
    # Work on the reply (STT, LLM, first TTS) starts this far into the silence
    # window and is thrown away if the user goes on; it hides that much latency.
    speculative_ms: int = Field(
        200,
        ge=0,
        description="server_vad: silence after which the reply starts being prepared "
        "(never played before the turn ends). 0, or anything not below silence_ms, turns "
        "it off. semantic_vad starts the reply when the turn model hears a finished turn.",
    )
    # Babble 10 dB under the caller sits ~13-15 dB under its smoothed loudest; the
    # caller's own quiet syllables dip that far only briefly, far short of silence_ms.
    background_db: float = Field(
        12.0,
        ge=0,
        le=60,
        description="Within an utterance, speech this many dB below its loudest counts as "
        "silence: other talkers in the room do not hold the caller's turn open. 0: off.",
    )
    max_utterance_s: float = Field(
        30.0, gt=0, le=120, description="A turn is ended forcibly after this much speech."
    )
    interrupt_response: bool = Field(
        True,
        description="User speech during a reply interrupts it (barge-in). Off: it waits "
        "and becomes the next turn.",
    )
    # Counted from the start of the utterance to its last speech (values below start_ms
    # act as start_ms). Silero ends speech where the sound does, so 240 ms is ~220 ms
    # of sound, less than "wait" or "stop" (webrtcvad's ~80 ms hangover made 300 ms
    # the same); a cough is no speech to Silero at all. Longer suits noisy rooms;
    # shorter reacts sooner.
    interrupt_min_speech_ms: int = Field(
        240, ge=0, le=5000, description="Speech needed during a reply before it is interrupted."
    )
    # LiveKit Agents and pipecat take false interruptions back; OpenAI's API does not.
    interrupt_mode: Literal["pause", "cancel"] = Field(
        "pause",
        description="What a barge-in does to a reply the server paces (WebRTC, WHIP, SIP): "
        "pause its audio, and resume it if the speech turns out to be no turn (no words, "
        "or only a backchannel such as 'mm-hm') within resume_window_ms; or cancel it at "
        "once. Replies sent over a socket (WebSocket, media streams) are always cancelled.",
    )
    resume_window_ms: int = Field(
        1500,
        ge=100,
        le=10_000,
        description="interrupt_mode pause: how long a paused reply waits for the "
        "interruption to show it is no turn; the user still talking then cancels it.",
    )
    echo_guard: bool = Field(
        False,
        description="For clients without echo cancellation (speakerphones, some SIP "
        "gateways): while the agent speaks, only speech within echo_margin_db of the "
        "agent's own output level counts towards a barge-in, and an utterance that never "
        "reaches it is dropped as the agent's echo.",
    )
    echo_guard_phones: bool = Field(
        True,
        description="echo_guard for phone calls (SIP, media streams, and WebRTC legs "
        "in G.711), whatever echo_guard says: no echo cancellation can be assumed there.",
    )
    echo_margin_db: float = Field(
        -10.0,
        ge=-60,
        le=30,
        description="With echo_guard: how loud the user must be, in dB relative to the "
        "agent's output level, to interrupt (-10: no more than 10 dB quieter).",
    )

    @field_validator("frame_ms", mode="before")
    @classmethod
    def _frame_ms_from_text(cls, value: Any) -> Any:
        # Flags and environment values arrive as text; a Literal of ints does not coerce.
        return int(value) if isinstance(value, str) and value.strip().isdigit() else value

    @model_validator(mode="after")
    def _whole_frames(self) -> VadSettings:
        for name in (
            "start_ms",
            "silence_ms",
            "prefix_padding_ms",
            "speculative_ms",
            "interrupt_min_speech_ms",
        ):
            if getattr(self, name) % self.frame_ms:
                raise ValueError(f"vad.{name} must be a multiple of vad.frame_ms ({self.frame_ms})")
        return self


class TurnSettings(BaseModel):
    """semantic_vad: a turn model (Smart Turn v3.2) decides when the user is done."""

    detection: Literal["server_vad", "semantic_vad"] = Field(
        "server_vad",
        description="How a session's turns end unless its client says otherwise: by "
        "silence alone (server_vad, vad.silence_ms), or when the turn model hears a "
        "finished turn (semantic_vad). The page starts from this too.",
    )
    eagerness: Literal["low", "medium", "high", "auto"] = Field(
        "auto",
        description="semantic_vad: the longest silence before a turn ends anyway, "
        "as OpenAI documents it: low 8 s, medium 4 s, high 2 s; auto is medium.",
    )
    # Both in whole VAD frames, rounded down.
    first_check_ms: int = Field(
        200, ge=20, le=2000, description="Silence after which the turn model is first asked."
    )
    recheck_ms: int = Field(
        300,
        ge=20,
        le=5000,
        description="While the model hears an unfinished turn, it is asked again after "
        "this much more silence.",
    )
    threshold: float = Field(
        0.5, gt=0, lt=1, description="Probability above which the model's 'finished' counts."
    )
    model_path: str = Field(
        "", description="Smart Turn ONNX file. Empty: the one in the pipecat-ai package."
    )
    threads: int = Field(1, ge=1, le=16, description="onnxruntime threads for the turn model.")
    keypad_pause_ms: int = Field(
        1500,
        ge=100,
        le=10_000,
        description="Keypad presses (DTMF) this close together are one entry for the agent; "
        "'#' ends an entry at once.",
    )
