"""What a session used, for billing and capacity planning: the user's audio heard, the
agent's audio played, turns, replies, and LLM tokens (as the LLM server reports them, or
as the embedded model counts them)."""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field

from app.engines.llm import TokenCount

SAMPLES_PER_S = 16_000  # the session's input: 16 kHz mono
RECENT_SESSIONS = 100


@dataclass(slots=True)
class Usage:
    audio_in_samples: int = 0
    audio_out_s: float = 0.0  # played to the user; a cut reply counts as far as it was heard
    turns: int = 0  # the user's turns that were committed
    replies: int = 0
    tokens: TokenCount = field(default_factory=TokenCount)

    def add(self, other: Usage) -> None:
        self.audio_in_samples += other.audio_in_samples
        self.audio_out_s += other.audio_out_s
        self.turns += other.turns
        self.replies += other.replies
        self.tokens.prompt += other.tokens.prompt
        self.tokens.completion += other.tokens.completion

    def snapshot(self) -> dict[str, float | int]:
        return {
            "audio_in_s": round(self.audio_in_samples / SAMPLES_PER_S, 3),
            "audio_out_s": round(self.audio_out_s, 3),
            "turns": self.turns,
            "replies": self.replies,
            "llm_tokens_in": self.tokens.prompt,
            "llm_tokens_out": self.tokens.completion,
        }


@dataclass(frozen=True, slots=True)
class SessionUsage:
    session_id: str
    transport: str
    started_at: float  # unix time
    usage: Usage
    ended_at: float | None = None

    def snapshot(self) -> dict[str, object]:
        end = self.ended_at if self.ended_at is not None else time.time()
        return {
            "session_id": self.session_id,
            "transport": self.transport,
            "live": self.ended_at is None,
            "started_at": round(self.started_at, 3),
            "duration_s": round(end - self.started_at, 3),
            **self.usage.snapshot(),
        }


class UsageLedger:
    """Usage over the process's life: every ended session in the total, the last `keep`
    of them itemized (a biller reads /v1/usage at least that often)."""

    def __init__(self, keep: int = RECENT_SESSIONS) -> None:
        self._ended = Usage()
        self._recent: deque[SessionUsage] = deque(maxlen=keep)

    def ended(self, session: SessionUsage) -> None:
        self._ended.add(session.usage)
        self._recent.appendleft(session)

    def report(self, live: list[SessionUsage]) -> dict[str, object]:
        total = Usage()
        total.add(self._ended)
        for session in live:
            total.add(session.usage)
        return {
            "total": total.snapshot(),
            "sessions": [session.snapshot() for session in [*live, *self._recent]],
        }
