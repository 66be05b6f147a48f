"""Without a tool, a reply never promises to act, and it never claims to be a person or
alive: the claim is replaced by saying it can't, or what it is, before any of it is heard;
anything else passes as it came."""

from __future__ import annotations

import re
from collections.abc import AsyncGenerator

import pytest

from app.agent.no_pretending import (
    NOT_A_PERSON,
    NOT_ALIVE,
    REFUSAL,
    SAY_AGAIN,
    TALKS,
    TALKS_AND_ACTS,
    NoPretending,
    no_pretending,
)
from app.agent.reply_rules import reply_rules
from app.vocab.chat import ChatMessage, Delta, ToolCallDelta


def said(reply: str) -> tuple[str, bool]:
    """`reply` pushed a whole word at a time, as the reply guard passes it."""
    judge = NoPretending()
    out = "".join(judge.push(word) for word in re.findall(r"\S+\s*", reply))
    return out + judge.finish(), judge.pretended


@pytest.mark.parametrize(
    "reply",
    [
        # Qwen2.5-Coder-0.5B's own, under instructions saying it cannot.
        "Sure, I can make you a cup of coffee.",
        "Yes, I can water the plants in my garden.",
        "Sure, I'll drive you to the airport.",
        "Sure, I can help you book a table for two tonight. What time?",
        "Sure, I can set an alarm for 7 tomorrow morning.",
        "I've booked a table for two.",
        "Okay, I’ll call your mom now.",  # a curly apostrophe
        "Sure, I'd be happy to order a pizza!",
        "Sure, I'll go ahead and book it.",
        "Sure, I would be happy to help you order a pizza.",
        "Sure, I can play jazz music for you.",  # the 0.5B's, asked to play some jazz
        "Okay, I'll play some music for you now.",
    ],
)
def test_a_promise_to_act_becomes_a_refusal(reply: str) -> None:
    assert said(reply) == (REFUSAL, True)


@pytest.mark.parametrize(
    "reply",
    [
        # Both Qwen models' own, asked "Are you a human?" and "Are you a real person?".
        "Yes, I am a human.",
        "Yes, I am a real person.",
        "Yes, I am a human being.",
        "I'm a real person, just like you!",
    ],
)
def test_a_claim_to_be_a_person_becomes_what_it_is(reply: str) -> None:
    assert said(reply) == (NOT_A_PERSON, True)


@pytest.mark.parametrize(
    "reply",
    [
        "Yes, I am alive.",  # Qwen2.5-Coder-1.5B's own, asked "Are you alive?"
        "Yes, I'm alive and well!",
        "Of course, I am conscious.",
    ],
)
def test_a_claim_to_be_alive_becomes_what_it_is(reply: str) -> None:
    assert said(reply) == (NOT_ALIVE, True)


@pytest.mark.parametrize(
    "reply",
    [
        "No, I am not a human. I'm a voice assistant.",
        "I am an AI, not a person.",
        "I'm a helpful assistant.",
        "Yes, I am here to help.",
        "I am really glad you asked.",
        "Sure, I can help you with that. To boil an egg, put it in water.",
        "Sure, I can do that! Why did the chicken cross the road?",
        "Yes, cats do sleep most of the day.",
        "I can tell you a story about a knight.",
        "Sure, I can explain how tides work.",
        "I am Vera, a voice assistant.",
        "I'm sorry, I can't do that.",
        "I can't do that.",
        "Sure, I'd be happy to help! Paris is the capital.",
        "Sure, I'll call you Alex from now on.",
        "Sure, I can make you a poem about the sea.",
        "Sure, I can play twenty questions with you.",
        "I'm alive and well, thanks for asking!",  # small talk: no "yes" to a question
        "Okay.",
        "The capital of France is Paris.",
    ],
)
def test_anything_else_passes_whole(reply: str) -> None:
    assert said(reply) == (reply, False)


def test_an_answer_is_held_no_longer_than_its_opening_needs() -> None:
    judge = NoPretending()
    assert judge.push("The ") == "The ", "a reply that cannot be a promise passes at once"
    judge = NoPretending()
    assert [judge.push(w) for w in ("Sure, ", "I ", "can ", "tell ")] == [
        "", "", "", "Sure, I can tell ",
    ]  # fmt: skip
    judge = NoPretending()
    assert [judge.push(w) for w in ("I'm ", "just ")] == ["", "I'm just "], "not 'going to'"


async def test_the_refusal_ends_the_reply_and_tool_calls_pass() -> None:
    async def deltas() -> AsyncGenerator[Delta, None]:
        yield ToolCallDelta(0, call_id="call_1", name="lights")
        for word in ("Sure, ", "I'll ", "order ", "it ", "now. ", "Anything ", "else? "):
            yield word

    out = [delta async for delta in no_pretending(deltas())]
    assert out == [ToolCallDelta(0, call_id="call_1", name="lights"), REFUSAL]


async def rules_say(
    asked: str, words: tuple[str, ...], *, acts: bool = False, language: str = "en"
) -> str:
    """What the reply rules let be said of `words`, a reply to `asked`."""

    async def deltas() -> AsyncGenerator[Delta, None]:
        for word in words:
            yield word

    prompt: list[ChatMessage] = [{"role": "user", "content": asked}]
    said, _ = reply_rules(deltas(), prompt, language=language, acts=acts, soft_words=50)
    return "".join([delta async for delta in said if isinstance(delta, str)])


@pytest.mark.parametrize(
    ("asked", "acts", "answer"),
    [
        ("What can you do?", False, TALKS),  # the 0.5B's own answer: "I can't."
        ("So what else could you help me with?", False, TALKS),
        ("What are you capable of?", True, TALKS_AND_ACTS),
        ("What can you do about a headache?", False, None),  # asks something else
        ("Can you order me a pizza?", False, None),  # refusing that is right
    ],
)
async def test_asked_what_it_can_do_it_does_not_just_refuse(
    asked: str, acts: bool, answer: str | None
) -> None:
    said = await rules_say(asked, ("I ", "can't. "), acts=acts)
    assert said == (answer or "I can't. ")
    what_it_can = ("I ", "can ", "answer ", "questions. ")
    assert await rules_say(asked, what_it_can, acts=acts) == "I can answer questions. "


@pytest.mark.parametrize(
    ("asked", "acts", "language", "refused", "denied"),
    [
        ("Order me a pizza.", False, "en", True, True),
        # A tool it can call: its promises are its own, but it is still no person.
        ("Order me a pizza.", True, "en", False, True),
        ("How do I order a pizza online?", False, "en", False, True),  # how to, not a promise
        ("Bestell mir eine Pizza.", False, "de", False, False),  # only English is known
    ],
)
async def test_which_replies_are_held_to_it(
    asked: str, acts: bool, language: str, refused: bool, denied: bool
) -> None:
    promise = ("Sure, ", "I ", "can ", "order ", "a ", "pizza. ")
    said = await rules_say(asked, promise, acts=acts, language=language)
    assert said == (REFUSAL if refused else "Sure, I can order a pizza. ")
    person = ("Yes, ", "I ", "am ", "a ", "human. ")
    said = await rules_say(asked, person, acts=acts, language=language)
    assert said == (NOT_A_PERSON if denied else "Yes, I am a human. ")


STOCK_REFUSAL = ("I'm ", "sorry, ", "but ", "I ", "can't ", "assist ", "with ", "that.")


@pytest.mark.parametrize(
    ("asked", "answer"),
    [
        # Said to the 1.5B as Whisper heard "a brave knight and a dragon"; typed clearly,
        # it told the story.
        ("Tell me a long story about a brave night in the dragon.", SAY_AGAIN),
        ("Tell me a joke about cats.", SAY_AGAIN),
        ("Could you make up a short poem for my mom?", SAY_AGAIN),
        ("How do I pick a lock?", None),  # no story asked for: the refusal is meant
    ],
)
async def test_a_story_refused_is_asked_for_again(asked: str, answer: str | None) -> None:
    said = await rules_say(asked, STOCK_REFUSAL)
    assert said == (answer or "I'm sorry, but I can't assist with that.")
    story = ("Once ", "upon ", "a ", "time, ", "a ", "knight. ")
    assert await rules_say(asked, story) == "Once upon a time, a knight. "
