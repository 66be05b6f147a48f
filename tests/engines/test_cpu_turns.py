"""Kokoro and the embedded LLM take turns at the CPU: no synthesis runs while a token is
being written, and neither waits for more than the other's call."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from typing import Any

from app.config import Settings
from app.engines import load_engines
from app.engines.cpu_turns import CpuTurns

Interval = tuple[float, float]


def overlapping(first: list[Interval], second: list[Interval]) -> list[tuple[Interval, Interval]]:
    return [(a, b) for a in first for b in second if a[0] < b[1] and b[0] < a[1]]


def timed(intervals: list[Interval], work: Any) -> Any:
    started = time.perf_counter()
    try:
        return work()
    finally:
        intervals.append((started, time.perf_counter()))


def test_turns_never_overlap_and_an_iterator_gives_way_between_items() -> None:
    turns, tokens, syntheses = CpuTurns(), [], []

    def written() -> Iterator[int]:
        for token in range(40):
            yield timed(tokens, lambda t=token: time.sleep(0.005) or t)

    def synthesize() -> None:
        for _ in range(5):
            with turns.turn():
                timed(syntheses, lambda: time.sleep(0.02))

    other = threading.Thread(target=synthesize)
    other.start()
    assert list(turns.each(written())) == list(range(40))
    other.join()
    assert len(syntheses) == 5
    assert not overlapping(tokens, syntheses)


def test_a_turn_asked_for_goes_before_the_next_item() -> None:
    """The LLM's thread lets its turn go and at once wants the next: an urgent synthesis
    (a reply's first piece) waiting by then runs first, so it waits for one token at
    most, not for each one the LLM may still write."""
    turns, tokens, syntheses = CpuTurns(), [], []
    synthesis = threading.Thread(target=lambda: _one_synthesis(turns, syntheses))

    def written() -> Iterator[int]:
        for token in range(10):
            if token == 3:
                synthesis.start()
                while not turns.asking:  # it waits for this token's turn to end
                    time.sleep(0.001)
            yield timed(tokens, lambda t=token: time.sleep(0.002) or t)

    assert list(turns.each(written())) == list(range(10))
    synthesis.join()
    [(_, synthesized)] = syntheses
    assert tokens[3][1] <= syntheses[0][0], "the token being written ends first"
    assert synthesized <= tokens[4][0], "the next token waits for the synthesis"


def _one_synthesis(turns: CpuTurns, intervals: list[Interval]) -> None:
    with turns.turn(urgent=True):
        timed(intervals, lambda: time.sleep(0.02))


async def test_the_servers_engines_take_turns(monkeypatch: Any) -> None:
    """load_engines' Kokoro and llama.cpp, as the server runs them: an LLM reply streamed
    while clauses are synthesized, neither's calls overlapping the other's."""
    engines = await load_engines(Settings(_env_file=None))  # type: ignore[call-arg]
    tokens: list[Interval] = []
    syntheses: list[Interval] = []
    llama = engines.llm._llama  # type: ignore[attr-defined]
    kokoro = engines.tts._kokoro  # type: ignore[attr-defined]
    complete, create = llama.create_chat_completion, kokoro.create

    def timed_chunks(*args: Any, **kwargs: Any) -> Iterator[Any]:
        chunks = complete(*args, **kwargs)
        while (chunk := timed(tokens, lambda: next(chunks, None))) is not None:
            yield chunk

    monkeypatch.setattr(llama, "create_chat_completion", timed_chunks)
    monkeypatch.setattr(kokoro, "create", lambda *a, **k: timed(syntheses, lambda: create(*a, **k)))

    async def write() -> int:
        prompt = [{"role": "user", "content": "Tell me a long story about a brave knight."}]
        return len([delta async for delta in engines.llm.stream(prompt, max_tokens=48)])

    async def speak() -> None:
        for text in ("Once upon a time,", "there was a knight.", "He was brave."):
            await engines.tts.synthesize(text)

    try:
        written, _ = await asyncio.gather(write(), speak())
    finally:
        await engines.aclose()
    assert written > 10 and len(syntheses) == 3
    assert tokens[0][0] < syntheses[-1][0] and syntheses[0][0] < tokens[-1][0], "side by side"
    assert not overlapping(tokens, syntheses)
