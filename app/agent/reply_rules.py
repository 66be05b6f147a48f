"""What of the LLM's reply may be said: one place for the responder and bench.answers."""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator

from app.agent.asked import asks_abilities, asks_how, asks_to_be_told
from app.agent.length import sentences_allowed
from app.agent.no_pretending import (
    ALIVE,
    NOT_UNDERSTOOD,
    PERSON,
    PROMISE,
    Claim,
    abilities,
    no_pretending,
)
from app.agent.reply_guard import ReplyGuard, guarded
from app.vocab.chat import ChatMessage, Delta
from app.vocab.languages import ENGLISH


def reply_rules(
    deltas: AsyncIterator[Delta],
    prompt: list[ChatMessage],
    *,
    language: str,
    acts: bool,
    soft_words: int | None,
    own_length: bool = False,
) -> tuple[AsyncGenerator[Delta, None], ReplyGuard]:
    """What of the LLM's reply to `prompt` may be said, and the guard that judges it: no
    babbling (past `soft_words`, unless the response set its `own_length`), no more
    sentences than the instructions give (app/agent/length.py), and in English no claim
    to be a person or alive, where the session cannot `acts` no promise to act, and asked
    what it can do, or for a story, no refusal (app/agent/no_pretending.py)."""
    if own_length:
        guard = ReplyGuard()
    else:
        guard = ReplyGuard(soft_words, sentences_allowed(prompt, language))
    said = guarded(deltas, guard)
    if (language or ENGLISH) != ENGLISH:
        return said, guard
    claims: list[Claim] = [PERSON, ALIVE]
    if not (acts or asks_how(prompt)):
        claims.append(PROMISE)
    if asks_abilities(prompt):
        claims.append(abilities(acts))
    if asks_to_be_told(prompt):
        claims.append(NOT_UNDERSTOOD)
    return no_pretending(said, tuple(claims)), guard
