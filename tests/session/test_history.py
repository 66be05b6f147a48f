from __future__ import annotations

import pytest

from app.session.history import ConversationTooLong, History, Message, Spoken, heard_text

TIMELINE = (
    Spoken("The capital of France", 0, 1000),
    Spoken("is Paris.", 1000, 1600),
)


def test_heard_text_keeps_whole_clauses_then_whole_words() -> None:
    assert heard_text(TIMELINE, 0) == ""
    assert heard_text(TIMELINE, 1000) == "The capital of France"
    assert heard_text(TIMELINE, 5000) == "The capital of France is Paris."
    # 22 letters and spaces in the clause: "The " ends at 4/22, "capital " at 12/22.
    assert heard_text(TIMELINE, 546) == "The capital"
    assert heard_text(TIMELINE, 545) == "The"
    assert heard_text(TIMELINE, 1100) == "The capital of France"  # "is " ends at 3/10
    assert heard_text(TIMELINE, 1300) == "The capital of France is"


def test_the_prompt_sees_interrupted_replies_as_far_as_heard() -> None:
    history = History(max_items=4)
    history.add(Message("user", "Where is Paris?", "item_1"))
    reply = Message("assistant", "The capital of France is Paris.", "item_2", timeline=TIMELINE)
    history.add(reply)
    history.truncate(reply, 1000)
    assert reply.interrupted
    assert history.prompt("be brief", limit=4) == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "Where is Paris?"},
        {"role": "assistant", "content": "The capital of France"},
    ]
    history.truncate(reply, 0)  # nothing heard: the reply is left out of the prompt
    assert [m["role"] for m in history.prompt("be brief", limit=4)] == ["system", "user"]
    assert history.find("item_2") is reply and history.find("nope") is None


@pytest.mark.parametrize(
    ("first", "then", "sent"),
    [
        # Whisper ends a fragment with a mark of its own: the words are what count.
        ("What is the capital of?", "Japan?", ["What is the capital of Japan?"]),
        ("Add up 45 and 38 and 17 for.", "me.", ["Add up 45 and 38 and 17 for me."]),
        ("Tell me about the", "moon.", ["Tell me about the moon."]),
        # A condition alone, the question after a pause (Piper's voice at a comma).
        (
            "If I have twenty dollars and spend seven.",
            "How much do I have left?",
            ["If I have twenty dollars and spend seven How much do I have left?"],
        ),
        (
            "Um, if it's ten o'clock now,",
            "what time is it in three hours?",
            ["Um, if it's ten o'clock now what time is it in three hours?"],
        ),
        # Whole words, stopped at their end: a correction, a question after a prelude.
        ("What is the capital of France?", "Sorry, I mean Italy.", None),
        ("I want to ask you something.", "What is the capital of Japan?", None),
        ("How are you?", "And what's your name?", None),
        ("What's the weather like?", "In Paris.", None),
        ("If today is Monday, what day is tomorrow?", "And after that?", None),
        ("If today is Monday what day is tomorrow?", "And after that?", None),
    ],
)
def test_words_that_stopped_short_are_finished_by_the_next(
    first: str, then: str, sent: list[str] | None
) -> None:
    history = History(max_items=10)
    history.add(Message("user", first, "item_1", spoken=True))
    history.add(Message("assistant", "", "item_2"))  # taken over before a word was heard
    history.add(Message("user", then, "item_3", spoken=True))
    users = [m["content"] for m in history.prompt("be brief", limit=10) if m["role"] == "user"]
    assert users == (sent or [first, then])


def test_only_spoken_words_with_no_reply_heard_between_are_joined() -> None:
    history = History(max_items=10)
    history.add(Message("user", "What is the capital of", "item_1", spoken=True))
    history.add(Message("assistant", "The capital", "item_2", interrupted=True))
    history.add(Message("user", "Japan?", "item_3", spoken=True))
    history.add(Message("user", "Tell me about the", "item_4"))  # typed
    history.add(Message("user", "moon.", "item_5", spoken=True))
    sent = [m["content"] for m in history.prompt("be brief", limit=10)[1:]]
    assert sent == ["What is the capital of", "The capital", "Japan?", "Tell me about the", "moon."]
    kept = history.find("item_3")  # the item itself is as the user said it
    assert kept is not None and kept.content == "Japan?"


def conversation(count: int) -> History:
    history = History(max_items=100)
    for n in range(count):
        history.add(Message("user" if n % 2 == 0 else "assistant", f"message {n}", f"item_{n}"))
    return history


def said(prompt: list[dict[str, str]]) -> list[int]:
    return [int(m["content"].split()[1]) for m in prompt[1:]]


def test_truncation_keeps_the_prompt_within_its_limit() -> None:
    # A retention ratio drops to that part of the limit at once, then the start stays put
    # (the LLM's cached prefix with it); auto is half.
    for truncation in (0.5, "auto"):
        starts = [
            said(conversation(n).prompt("x", limit=10, truncation=truncation))[0]
            for n in (10, 11, 12, 16, 17)
        ]
        assert starts == [0, 6, 6, 6, 12]
        assert len(said(conversation(16).prompt("x", limit=10, truncation=truncation))) == 10
    starts = [said(conversation(n).prompt("x", limit=10, truncation=0.8))[0] for n in (11, 13, 14)]
    assert starts == [3, 3, 6]
    # disabled: a conversation too long for one prompt fails the reply instead.
    assert len(said(conversation(10).prompt("x", limit=10, truncation="disabled"))) == 10
    with pytest.raises(ConversationTooLong, match="truncation is disabled"):
        conversation(11).prompt("x", limit=10, truncation="disabled")
    # Memory itself is bounded: the oldest items go first.
    small = History(max_items=3)
    for n in range(5):
        small.add(Message("user", f"message {n}", f"item_{n}"))
    assert [m.item_id for m in small.messages()] == ["item_2", "item_3", "item_4"]


def test_a_prompt_to_come_starts_as_it_will_once_its_messages_are_added() -> None:
    # What the LLM reads ahead: the prompt's start once `coming` messages are added, where
    # the window moves (10 -> 12 messages at a limit of 10) and where it does not.
    for count in (8, 10, 12, 15):
        start = conversation(count).prompt("x", limit=10, coming=2)
        later = conversation(count + 2).prompt("x", limit=10)
        assert start == later[:-2], count
    assert said(conversation(10).prompt("x", limit=10, coming=2)) == [6, 7, 8, 9]


def test_the_users_speech_is_kept_for_the_newest_items_only() -> None:
    history = History(max_items=100)
    second = bytes(32_000)
    for n in range(25):
        history.add(Message("user", f"said {n}", f"item_{n}", spoken=True, audio=second))
    kept = [m.item_id for m in history.messages() if m.audio is not None]
    assert kept == [f"item_{n}" for n in range(5, 25)], "20 items at the most"
    assert all(m.audio_dropped for m in history.messages()[:5])
    history.add(Message("user", "a long one", "item_long", spoken=True, audio=second * 50))
    kept_s = sum(len(m.audio or b"") for m in history.messages()) / 32_000
    assert kept_s <= 60 and history.find("item_long") is not None
    assert history.find("item_long").audio is not None, "the newest is kept first"  # type: ignore[union-attr]
