"""What is done to the caller's audio before the turn detector and Whisper hear it."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

NoiseReduction = Literal["off", "near_field", "far_field"]


class AudioSettings(BaseModel):
    # Browsers cancel their own echo (getUserMedia's echoCancellation), so WebRTC peers
    # are left alone unless asked; a phone line can be assumed to have none.
    echo_cancellation: bool = Field(
        False,
        description="Cancel the agent's own voice in what WebRTC peers send back (WebRTC's "
        "AEC3, with what the server played as the reference). For peers without echo "
        "cancellation: speakerphone apps, gateways.",
    )
    echo_cancellation_phones: bool = Field(
        True,
        description="The same for phone calls (SIP, media streams, WebRTC legs in G.711), "
        "whatever echo_cancellation says. Its output is used only while the agent's "
        "voice is heard coming back, so a line without echo is left as it is.",
    )
    noise_reduction: NoiseReduction = Field(
        "off",
        description="Noise suppression (WebRTC NS) on the audio the turn detector judges, "
        "unless a session asks otherwise with audio.input.noise_reduction: near_field "
        "(moderate, a headset) or far_field (strong, a laptop or a room's microphone). "
        "Whisper always hears the unsuppressed audio, which it transcribes better.",
    )
