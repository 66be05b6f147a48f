"""Call recordings: off unless the operator keeps them, and then only for sessions that
ask (Live's `store: true`), never past their retention."""

from __future__ import annotations

from pydantic import BaseModel, Field


class RecordingSettings(BaseModel):
    retention_s: float = Field(
        0.0,
        ge=0,
        description="How long a recording is kept after its call ends; 0 keeps none (a "
        "session asking for one is told store: false).",
    )
    dir: str = Field(
        "",
        description="Where recordings are kept while they are; empty: a folder in the "
        "system's temporary directory. Only this user may enter it (0700) or read them "
        "(0600); a folder that is a link or another user's does not start. Stopped on "
        "purpose, the server deletes them; after a crash, the next start serves those still "
        "within their retention and deletes the rest.",
    )
    max_bytes: int = Field(
        1024**3,
        ge=1024**2,
        description="The most disk all recordings may take together, kept and being "
        "written (1 GiB: about 4 hours of calls); a call that would pass it is not recorded, "
        "which its download (404) and the log say.",
    )
    max_s: float = Field(
        900.0,
        gt=0,
        le=7200,
        description="The most of one call a recording holds (16 kHz stereo: 64 KB a "
        "second, written to disk as the call goes).",
    )
