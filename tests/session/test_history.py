from __future__ import annotations

from app.session.history import History, Message, Spoken, heard_text

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
    history = History(max_messages=4)
    history.add(Message("user", "Where is Paris?", "item_1"))
    reply = Message("assistant", "The capital of France is Paris.", "item_2", timeline=TIMELINE)
    history.add(reply)
    history.truncate(reply, 1000)
    assert reply.interrupted
    assert history.prompt("be brief") == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "Where is Paris?"},
        {"role": "assistant", "content": "The capital of France"},
    ]
    history.truncate(reply, 0)  # nothing heard: the reply is left out of the prompt
    assert [m["role"] for m in history.prompt("be brief")] == ["system", "user"]
    assert history.find("item_2") is reply and history.find("nope") is None
