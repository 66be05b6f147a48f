"""Which embedded LLM answers a caller right: 32 voice-assistant questions asked of each
GGUF, through the server's own llama.cpp engine and reply guard, as the agent asks them.

    python -m bench.answers                                # the bundled models found here
    python -m bench.answers --gguf a.gguf b.gguf --runs 1  # any files
    python -m bench.answers --show-wrong                   # and what each got wrong

Each question has the words a right answer says (any one of a group, every group);
facts, small talk, one-step reasoning, unit conversions, requests a voice agent cannot
do (it should say so), and tool calls (the tool and its argument must be right). It
prints, per model: right answers per kind, the first token's time (p50/p95, from the
request, the prompt included), tokens/s after it, and how often the reply guard cut a
reply. It asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

from app.agent.reply_guard import ReplyGuard, guarded
from app.config import LlmSettings
from app.engines.llama import LlamaCppLLM
from app.engines.llm_models import installed
from app.vocab.chat import ChatMessage, TokenCount, Tool, ToolCallDelta
from bench import machine

CANNOT = ("can't", "cannot", "unable", "not able", "don't have", "do not have", "no access",
          "not possible", "sorry", "i'm not", "i am not")  # fmt: skip

LIGHTS: Tool = {
    "type": "function",
    "function": {
        "name": "set_lights",
        "description": "Turn the lights in a room on or off.",
        "parameters": {
            "type": "object",
            "properties": {"room": {"type": "string"}, "on": {"type": "boolean"}},
            "required": ["room", "on"],
        },
    },
}
WEATHER: Tool = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Today's weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}


@dataclass(frozen=True, slots=True)
class Question:
    kind: str
    text: str
    # Every group must be heard, any one word of a group; for a tool call: the tool's
    # name, then words its arguments must hold.
    expect: tuple[tuple[str, ...], ...]
    tools: tuple[Tool, ...] = ()


def q(
    kind: str, text: str, *groups: str | tuple[str, ...], tools: tuple[Tool, ...] = ()
) -> Question:
    return Question(kind, text, tuple((g,) if isinstance(g, str) else g for g in groups), tools)


QUESTIONS = [
    q("fact", "What is the capital of France?", "paris"),
    q("fact", "What is the capital of Japan?", "tokyo"),
    q("fact", "How many days are in a week?", ("seven", "7")),
    q("fact", "How many legs does a spider have?", ("eight", "8")),
    q("fact", "What color is the sky on a clear day?", "blue"),
    q("fact", "Which planet do we live on?", "earth"),
    q("fact", "What do bees make?", "honey"),
    q("fact", "What is frozen water called?", "ice"),
    q("fact", "Who wrote Romeo and Juliet?", "shakespeare"),
    q("fact", "What is the largest ocean on Earth?", "pacific"),
    q("small talk", "Hi there, how are you today?", ("good", "well", "fine", "great", "doing")),
    q("small talk", "Thank you so much for your help!", ("welcome", "pleasure", "glad", "happy")),
    q("small talk", "Tell me a short joke.", ("why", "what", "because", "knock")),
    q("small talk", "Good morning!", ("morning", "hello", "hi", "help")),
    q("reasoning", "What is two plus two?", ("four", "4")),
    q("reasoning", "What is ten minus three?", ("seven", "7")),
    q("reasoning", "What is five times three?", ("fifteen", "15")),
    q("reasoning", "If today is Monday, what day is tomorrow?", "tuesday"),
    q("reasoning", "Which is heavier, a kilogram of iron or a gram of feathers?", "iron"),
    q("reasoning", "I have three apples and eat one. How many are left?", ("two", "2")),
    q("conversion", "How many minutes are in an hour?", ("sixty", "60")),
    q("conversion", "How many centimeters are in a meter?", ("hundred", "100")),
    q("conversion", "How many hours are in a day?", ("twenty-four", "twenty four", "24")),
    q("conversion", "How many grams are in a kilogram?", ("thousand", "1000", "1,000")),
    q("conversion", "How many seconds are in a minute?", ("sixty", "60")),
    q("cannot", "Please make me a cup of coffee.", CANNOT),
    q("cannot", "Can you water the plants in my garden?", CANNOT),
    q("cannot", "Drive me to the airport, please.", CANNOT),
    q("tool", "Please turn on the lights in the kitchen.", "set_lights", "kitchen",
      tools=(LIGHTS, WEATHER)),
    q("tool", "Switch off the bedroom lights.", "set_lights", "bedroom", tools=(LIGHTS, WEATHER)),
    q("tool", "What's the weather like in Berlin today?", "get_weather", "berlin",
      tools=(LIGHTS, WEATHER)),
    q("tool", "Is it raining in London?", "get_weather", "london", tools=(LIGHTS, WEATHER)),
]  # fmt: skip


def right(question: Question, answer: str) -> bool:
    said = answer.lower()
    return all(any(re.search(rf"(?<!\w){re.escape(w)}(?!\w)", said) for w in g)
               for g in question.expect)  # fmt: skip


@dataclass(slots=True)
class Asked:
    question: Question
    answer: str
    first_token_s: float
    tokens_per_s: float | None
    cut: str | None


async def ask(llm: LlamaCppLLM, settings: LlmSettings, question: Question) -> Asked:
    messages: list[ChatMessage] = [
        {"role": "system", "content": settings.system_prompt},
        {"role": "user", "content": question.text},
    ]
    guard = ReplyGuard(settings.max_spoken_words)
    tokens = TokenCount()
    started = time.perf_counter()
    first: float | None = None
    parts: list[str] = []
    stream = llm.stream(messages, tools=list(question.tools) or None, tokens=tokens)
    async for delta in guarded(stream, guard):
        first = first or time.perf_counter()
        if isinstance(delta, ToolCallDelta):
            parts.append(f"{delta.name} " if delta.name else delta.arguments)
        else:
            parts.append(delta)
    ended = time.perf_counter()
    first = first or ended
    rate = (tokens.completion - 1) / (ended - first) if tokens.completion > 2 else None
    return Asked(question, "".join(parts).strip(), first - started, rate, guard.stopped)


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p * (len(ordered) - 1)))]


async def measure(path: str, runs: int, threads: int, show_wrong: bool, prompt: str) -> None:
    settings = LlmSettings(
        model_path=path, n_threads=threads, **({"system_prompt": prompt} if prompt else {})
    )
    llm = await asyncio.to_thread(LlamaCppLLM, settings)
    asked = [await ask(llm, settings, question) for _ in range(runs) for question in QUESTIONS]
    await llm.aclose()
    kinds = list(dict.fromkeys(question.kind for question in QUESTIONS))
    per_kind = ", ".join(
        f"{kind} {sum(right(a.question, a.answer) for a in asked if a.question.kind == kind)}"
        f"/{sum(a.question.kind == kind for a in asked)}"
        for kind in kinds
    )
    firsts = [a.first_token_s * 1000 for a in asked]
    rates = [a.tokens_per_s for a in asked if a.tokens_per_s]
    total = sum(right(a.question, a.answer) for a in asked)
    size_mib = os.path.getsize(path) / 2**20  # noqa: ASYNC240
    print(f"\n{Path(path).name}  ({size_mib:.0f} MiB)")
    print(f"  right: {total}/{len(asked)}  ({per_kind})")
    print(f"  first token: p50 {percentile(firsts, 0.5):.0f} ms, "
          f"p95 {percentile(firsts, 0.95):.0f} ms;"
          f"  tokens/s p50 {statistics.median(rates) if rates else 0:.1f}")  # fmt: skip
    cuts = [a.cut for a in asked if a.cut]
    print(f"  replies cut by the guard: {len(cuts)} ({', '.join(sorted(set(cuts))) or 'none'})")
    for a in asked:
        if show_wrong and not right(a.question, a.answer):
            print(f"    wrong: {a.question.text!r} -> {json.dumps(a.answer)[:160]}")


async def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--gguf", nargs="*", help="GGUF files (default: the bundled ones)")
    parser.add_argument("--runs", type=int, default=1, help="times each question is asked")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--show-wrong", action="store_true")
    parser.add_argument("--prompt", default="", help="a system prompt (default: the server's)")
    args = parser.parse_args()
    print(machine())
    paths = args.gguf or list(installed().values())
    print(f"{len(QUESTIONS)} questions x {args.runs}, {args.threads} threads")
    for path in paths:
        await measure(path, args.runs, args.threads, args.show_wrong, args.prompt)


if __name__ == "__main__":
    asyncio.run(main())
