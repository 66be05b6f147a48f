"""The agent says who it is: the model it runs, and what it can do with the tools it has."""

from __future__ import annotations

import pytest

from app.agent.responders import as_told
from app.config import LlmSettings
from app.vocab.chat import ChatMessage
from app.vocab.persona import (
    TALKS_ANSWERS,
    WHOLE_ANSWER,
    WHOLE_REFUSAL,
    WITH_TOOLS,
    WITHOUT_TOOLS,
    filled,
    spoken_model,
)


@pytest.mark.parametrize(
    ("served", "said"),
    [
        ("Qwen2.5-Coder-0.5B-Instruct Q4_K_M", "Qwen 2.5 Coder 0.5 B"),  # an embedded title
        ("Qwen/Qwen2.5-0.5B-Instruct", "Qwen 2.5 0.5 B"),  # vLLM's served name
        ("mistral-7b-instruct-v0.3.Q4_K_M.gguf", "mistral 7 b"),  # a file of the operator's
        ("gemma-2-2b-it", "gemma 2 2 b"),
        ("Llama-3.2-1B.Q4_K_M.gguf", "Llama 3.2 1 B"),  # quantization after a dot
        ("", "a language model"),
    ],
)
def test_the_model_is_named_as_a_person_says_it(served: str, said: str) -> None:
    assert spoken_model(served) == said


def test_the_default_instructions_name_the_model_and_what_it_can_do() -> None:
    default = LlmSettings().system_prompt
    bare = filled(default, model="Qwen2.5-Coder-0.5B-Instruct Q4_K_M", tools=False)
    assert "running the Qwen 2.5 Coder 0.5 B model" in bare and "{" not in bare
    assert WITHOUT_TOOLS in bare and WITH_TOOLS not in bare
    armed = filled(default, model="Qwen2.5-Coder-0.5B-Instruct Q4_K_M", tools=True)
    assert WITH_TOOLS in armed and WITHOUT_TOOLS not in armed
    assert "Example" not in bare + armed, "the 0.5B shown an exchange repeats the user"


@pytest.mark.parametrize(
    "served",
    [
        "Qwen2.5-Coder-1.5B-Instruct Q4_K_M",
        "Qwen/Qwen2.5-Coder-1.5B-Instruct",
        "qwen2.5-coder-1.5b.gguf",  # the joined file, given as llm.model_path
    ],
)
def test_a_model_that_refuses_too_much_is_told_what_it_can_do_its_own_way(served: str) -> None:
    """The 1.5B, told it can "only talk", answered "I can't." to questions; it gets its
    own sentence, embedded or served by vLLM, and a tool still comes first."""
    default = LlmSettings().system_prompt
    bare = filled(default, model=served, tools=False)
    assert TALKS_ANSWERS in bare and WITHOUT_TOOLS not in bare
    assert WITH_TOOLS in filled(default, model=served, tools=True)


def test_a_model_that_answers_in_one_word_is_shown_whole_sentences() -> None:
    """The 1.5B's "Sixty-three." or "I can't.", alone, is what a listener mishears; shown
    an exchange it says "Nine times seven is sixty-three." With tools, a request may be
    one to carry out, so it is not shown a refusal."""
    default = LlmSettings().system_prompt
    bare = filled(default, model="Qwen2.5-Coder-1.5B-Instruct Q4_K_M", tools=False)
    assert bare.endswith(f"unless asked for more.{WHOLE_ANSWER}{WHOLE_REFUSAL}")
    armed = filled(default, model="Qwen2.5-Coder-1.5B-Instruct Q4_K_M", tools=True)
    assert armed.endswith(f"unless asked for more.{WHOLE_ANSWER}") and "taxi" not in armed
    assert filled("Say {examples} here.", model="gemma-2-2b-it", tools=False) == "Say  here."


def test_only_the_instructions_are_filled_in() -> None:
    """A client's own instructions without the placeholders are left as they are, and
    the user's words are never touched, braces and all."""
    own = "You are a pirate. Say arr."
    assert filled(own, model="m", tools=False) == own
    prompt: list[ChatMessage] = [
        {"role": "system", "content": "Run {model}. {abilities}"},
        {"role": "user", "content": "What does {model} mean?"},
    ]
    told = as_told(prompt, model="SmolLM2-135M-Instruct Q4_1", tools=False)
    assert told[0]["content"] == f"Run SmolLM 2 135 M. {WITHOUT_TOOLS}"
    assert told[1] == prompt[1]
    assert prompt[0]["content"] == "Run {model}. {abilities}", "the session's copy is kept"
