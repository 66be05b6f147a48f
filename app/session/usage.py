"""What a session used, for billing and capacity planning: the user's audio heard, the
agent's audio played, turns, replies, and LLM tokens (as the LLM server reports them, or
as the embedded model counts them)."""

from __future__ import annotations

from dataclasses import dataclass, field

from app.vocab.chat import TokenCount
from app.vocab.pcm import INBOUND_RATE


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
        self.tokens.cached += other.tokens.cached

    def snapshot(self) -> dict[str, float | int]:
        return {
            "audio_in_s": round(self.audio_in_samples / INBOUND_RATE, 3),
            "audio_out_s": round(self.audio_out_s, 3),
            "turns": self.turns,
            "replies": self.replies,
            "llm_tokens_in": self.tokens.prompt,
            "llm_tokens_in_cached": self.tokens.cached,
            "llm_tokens_out": self.tokens.completion,
        }
