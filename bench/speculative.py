"""Speculative decoding on this CPU: Qwen2.5-Coder-1.5B writing alone, and with the 0.5B
drafting k tokens ahead for it to check in one batch (llama-cpp-python's draft-model
hook). Both models share one vocabulary, so a draft is the big model's tokens as they
are. It prints, per k, tokens/s after the first token (p50 over a handful of replies at
temperature 0, whose text is the same drafted or not), and what a batch of k tokens costs
each model: drafting pays only where checking k tokens at once is much cheaper than
writing them one by one.

    python -m bench.speculative                # k = 2, 4, 6
    python -m bench.speculative --drafts 3     # one k
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import numpy as np
import numpy.typing as npt
from llama_cpp import Llama
from llama_cpp.llama_speculative import LlamaDraftModel

from app.engines.llm_models import gguf_path
from bench import machine

QUESTIONS = (
    "Who painted the Mona Lisa?",
    "Tell me a short story about a cat.",
    "How do I boil an egg?",
    "Why is the sky blue?",
    "What is the capital of Australia?",
)
INSTRUCTIONS = "You are Vera, a voice assistant. Answer in one or two short spoken sentences."
BATCHES = (1, 3, 5, 7)


class SmallDrafts(LlamaDraftModel):
    """The small model's greedy next `k` tokens; its cache kept for the prefix it shares
    with the big model's tokens so far."""

    def __init__(self, llm: Llama, k: int) -> None:
        self._llm = llm
        self._k = k
        self.rounds = self.drafted = 0

    def __call__(self, input_ids: npt.NDArray[np.intc], /, **unused: Any) -> npt.NDArray[np.intc]:
        llm, ids = self._llm, input_ids.tolist()
        known = llm.input_ids[: llm.n_tokens].tolist()
        shared = 0
        while shared < min(len(known), len(ids)) and known[shared] == ids[shared]:
            shared += 1
        shared = min(shared, len(ids) - 1)  # at least one token to eval, for its logits
        llm.n_tokens = shared
        llm._ctx.kv_cache_seq_rm(-1, shared, -1)
        llm.eval(ids[shared:])
        drafts: list[int] = []
        for _ in range(self._k):
            token = int(np.argmax(llm.scores[llm.n_tokens - 1]))
            drafts.append(token)
            if token == llm.token_eos():
                break
            llm.eval([token])
        self.rounds += 1
        self.drafted += len(drafts)
        return np.array(drafts, dtype=np.intc)


def tokens_per_second(llm: Llama) -> tuple[float, list[str], int]:
    """p50 tokens/s after the first token over QUESTIONS, the replies, and how many
    tokens they had."""
    rates, replies, tokens = [], [], 0
    for question in QUESTIONS:
        messages: Any = [
            {"role": "system", "content": INSTRUCTIONS},
            {"role": "user", "content": question},
        ]
        first, count, text = 0.0, 0, ""
        settings: Any = {"max_tokens": 80, "temperature": 0, "stream": True}
        stream: Any = llm.create_chat_completion(messages, **settings)
        for chunk in stream:
            delta = chunk["choices"][0]["delta"].get("content")
            if delta:
                count += 1
                text += str(delta)
                first = first or time.perf_counter()
        rates.append((count - 1) / (time.perf_counter() - first))
        replies.append(text)
        tokens += count
    return statistics.median(rates), replies, tokens


def batch_costs(path: str, *, logits_all: bool) -> dict[int, float]:
    """Milliseconds to eval a batch of n tokens after a short prefix (median of 5)."""
    llm = Llama(model_path=path, n_ctx=512, n_threads=2, verbose=False, logits_all=logits_all)
    prefix = llm.tokenize(b"You are Vera, a voice assistant. The sky is blue because of")
    llm.eval(prefix)
    costs = {}
    for n in BATCHES:
        times = []
        for _ in range(5):
            llm.n_tokens = len(prefix)
            llm._ctx.kv_cache_seq_rm(-1, len(prefix), -1)
            start = time.perf_counter()
            llm.eval(prefix[:n])
            times.append(time.perf_counter() - start)
        costs[n] = 1000 * statistics.median(times)
    return costs


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--big", default="", help="the GGUF that answers (default: bundled 1.5B)")
    parser.add_argument("--small", default="", help="the GGUF that drafts (default: bundled 0.5B)")
    parser.add_argument("--drafts", type=int, nargs="+", default=[2, 4, 6], help="tokens a round")
    args = parser.parse_args()
    big = args.big or gguf_path("qwen2.5-coder-1.5b")
    small = args.small or gguf_path("qwen2.5-coder-0.5b")
    print(machine())

    for name, path in (("1.5B", big), ("0.5B", small)):
        costs = batch_costs(path, logits_all=name == "1.5B")  # drafting needs every logit
        print(f"{name}: a batch of " + ", ".join(f"{n}: {ms:.0f} ms" for n, ms in costs.items()))

    alone = Llama(model_path=big, n_ctx=2048, n_threads=2, verbose=False)
    plain, said, _ = tokens_per_second(alone)
    print(f"1.5B alone: {plain:.1f} tokens/s")
    drafter = Llama(model_path=small, n_ctx=2048, n_threads=2, verbose=False, logits_all=True)
    for k in args.drafts:
        drafts = SmallDrafts(drafter, k)
        llm = Llama(model_path=big, n_ctx=2048, n_threads=2, verbose=False, draft_model=drafts)
        rate, replies, tokens = tokens_per_second(llm)
        same = sum(a == b for a, b in zip(replies, said, strict=True))
        # Each round writes its kept drafts and one token of the 1.5B's own.
        kept = max(0, tokens - drafts.rounds) / max(1, drafts.drafted)
        print(
            f"1.5B, 0.5B drafting {k}: {rate:.1f} tokens/s, {kept:.0%} of drafts kept "
            f"({same}/{len(said)} replies the same)"
        )


if __name__ == "__main__":
    main()
