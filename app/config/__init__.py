"""Settings: one tree, read from the environment and `.env`, overridable per flag.

Environment keys are `VOICE_<SECTION>__<FIELD>`, e.g. `VOICE_POOL__MAX_SESSIONS=8`.
Every field here is also a CLI flag (see `app.cli`). The sections live in this package's
modules, by what they are about.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Literal

from pydantic import Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from app.config.audio import AudioSettings
from app.config.engines import LlmSettings, SttSettings, TtsSettings
from app.config.phone import SipSettings, TwilioSettings
from app.config.recordings import RecordingSettings
from app.config.server import LimitsSettings, PoolSettings, ServerSettings, split_csv
from app.config.tools import ToolsSettings
from app.config.turns import TurnSettings, VadSettings

__all__ = [
    "AudioSettings", "LimitsSettings", "LlmSettings", "PoolSettings", "RecordingSettings",
    "ServerSettings", "Settings",
    "SipSettings", "SttSettings", "ToolsSettings", "TtsSettings", "TurnSettings", "TwilioSettings",
    "VadSettings", "get_settings", "split_csv",
]  # fmt: skip


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="VOICE_",
        env_nested_delimiter="__",
        env_file=".env",
        extra="ignore",
    )

    agent: Literal["llm", "echo"] = Field(
        "llm", description="llm: Whisper -> LLM -> Kokoro. echo: play each utterance back."
    )
    server: ServerSettings = Field(default_factory=ServerSettings)
    pool: PoolSettings = Field(default_factory=PoolSettings)
    limits: LimitsSettings = Field(default_factory=LimitsSettings)
    vad: VadSettings = Field(default_factory=VadSettings)
    turn: TurnSettings = Field(default_factory=TurnSettings)
    audio: AudioSettings = Field(default_factory=AudioSettings)
    stt: SttSettings = Field(default_factory=SttSettings)
    llm: LlmSettings = Field(default_factory=LlmSettings)
    tts: TtsSettings = Field(default_factory=TtsSettings)
    sip: SipSettings = Field(default_factory=SipSettings)
    twilio: TwilioSettings = Field(default_factory=TwilioSettings)
    recordings: RecordingSettings = Field(default_factory=RecordingSettings)
    tools: ToolsSettings = Field(default_factory=ToolsSettings)

    @model_validator(mode="after")
    def _webhook_needs_a_key(self) -> Settings:
        # Whoever may accept a ringing call chooses its session: not anyone who can reach
        # the port.
        if self.sip.webhook_url and not self.server.api_key:
            raise ValueError(
                "sip.webhook_url needs server.api_key (--server-api-key): the application "
                "accepts and rejects the calls it is offered with that key"
            )
        return self


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """Process settings; tests build their own `Settings(...)` and pass it to create_app."""
    return Settings()
