"""Who the agent says it is. Instructions may say `{model}` and `{abilities}`: they are
filled in for the model serving the reply and for whether the session has tools, so the
agent names the model it really runs and never claims to act without a tool to act with.

Small models take their maker from their training data ("I am an AI language model
created by OpenAI", said by Qwen2.5-Coder-0.5B) and agree to anything ("Sure, I'll
drive you to the airport"); told who they are and what they cannot do, they say so.
"""

from __future__ import annotations

import re

MODEL = "{model}"
ABILITIES = "{abilities}"
EXAMPLES = "{examples}"
PLACEHOLDERS = (MODEL, ABILITIES, EXAMPLES)

_QUANTIZED = re.compile(r"[-_.](?:i?q\d\w*|f16|bf16|fp16|f32)$", re.IGNORECASE)
_SUFFIX = re.compile(r"[-_.](?:instruct|chat|it)(?:[-_.].*)?$", re.IGNORECASE)
_JOINS = re.compile(r"[-_\s]+|(?<=[A-Za-z])(?=\d)|(?<=\d)(?=[A-Za-z])")

# Short: "You can talk, answer questions, explain things and tell stories" made its
# replies longer (bench.latency: 17 joins in 10 replies where there had been 7).
WITHOUT_TOOLS = (
    "You can only talk: you cannot book, order, buy, call, message, set alarms or do "
    "anything outside this conversation, so when asked to, say you can't."
)
WITH_TOOLS = "You can act only through the tools you are given; for anything else, say you can't."
# Said another way for a model that reads "only talk" as "say you can't" to everything:
# Qwen2.5-Coder-1.5B answered "I can't." to the Mona Lisa, a sum and a story (32 of 40
# held out, 37 with this). The 0.5B told this talks longer and agrees to more (107 of 126
# on the tuned half against 112), so each keeps its own. Keyed by the name as said, so a
# vLLM serving the same model, or its file given by path, gets the same sentence.
TALKS_ANSWERS = (
    "You can talk and answer any question, but you cannot book, order, buy, call, "
    "message, set alarms or do anything else outside this conversation; when asked to do "
    "such a thing, say you can't."
)
_WITHOUT_TOOLS_FOR = {"qwen 2.5 coder 1.5 b": TALKS_ANSWERS}

# Told to answer "in a whole sentence", the 1.5B still said "Mice", "Sixty-three." and
# "I can't.": 31 of 158 replies of three words or fewer. A lone word is what a listener
# (and Whisper) mishears most, "Mice." as "Marisa." and "eighteen." as "I can't." Shown
# one exchange, it wrote 3 such replies. The 0.5B shown the same repeated the user's
# words back ("Drive me to the airport, please."), so it is shown none.
WHOLE_ANSWER = "\n\nExample:\nUser: What's six times four?\nVera: Six times four is twenty-four."
# Only where it cannot act: with tools, a request may be one to carry out.
WHOLE_REFUSAL = (
    "\nUser: Order me a taxi.\nVera: Sorry, I can't order a taxi; I can only talk with you."
)
_EXAMPLES_FOR = {"qwen 2.5 coder 1.5 b": (WHOLE_ANSWER, WHOLE_REFUSAL)}


def spoken_model(name: str) -> str:
    """A model's name as a person says it: no organisation, file type, quantization or
    instruct suffix ("Qwen/Qwen2.5-0.5B-Instruct", "Qwen2.5-Coder-0.5B-Instruct Q4_K_M"
    -> "Qwen 2.5 0.5 B", "Qwen 2.5 Coder 0.5 B")."""
    bare = name.rsplit("/", 1)[-1].split(" ")[0].removesuffix(".gguf")
    bare = _QUANTIZED.sub("", bare) or bare
    bare = _SUFFIX.sub("", bare) or bare
    # Apart, its numbers are said as numbers: "Qwen two point five Coder zero point five B".
    return _JOINS.sub(" ", bare).strip() or "a language model"


def filled(instructions: str, *, model: str, tools: bool) -> str:
    """`instructions` with `{model}`, `{abilities}` and `{examples}` said for this reply."""
    if not any(placeholder in instructions for placeholder in PLACEHOLDERS):
        return instructions
    said = spoken_model(model)
    talk_only = _WITHOUT_TOOLS_FOR.get(said.lower(), WITHOUT_TOOLS)
    answer, refusal = _EXAMPLES_FOR.get(said.lower(), ("", ""))
    return (
        instructions.replace(MODEL, said)
        .replace(ABILITIES, WITH_TOOLS if tools else talk_only)
        .replace(EXAMPLES, answer if tools else answer + refusal)
    )
