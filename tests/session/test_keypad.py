"""Keypad presses (DTMF) as input: each key is reported, an entry becomes the user's turn
and is answered, and an entry cuts a playing reply short. Engine doubles."""

from __future__ import annotations

import pytest

from app.session import messages as msg
from app.session.listening.keypad import entry_text
from app.session.options import OptionChanges, TurnDetectionChange
from tests.session.fakes import FakeLLM, kinds, make_session, wait_for


async def test_keys_are_reported_and_an_entry_ending_in_hash_is_answered() -> None:
    session, sent, _, engines = make_session()
    assert isinstance(engines.llm, FakeLLM)
    for key in "12#":
        session.press(key)
    assert [m.key for m in sent.of(msg.KeyPressed)] == ["1", "2", "#"]
    added = sent.nth(msg.TextItemAdded)
    assert (added.role, added.text) == ("user", entry_text("12#"))
    assert kinds(sent).index("TextItemAdded") > kinds(sent).index("KeyPressed"), (
        "the keys come before the entry they make"
    )
    await wait_for(sent, msg.ReplyEnded)
    assert engines.llm.prompts[0][-1] == {"role": "user", "content": "[keypad: 12#]"}
    assert sent.nth(msg.ReplyEnded).status == "completed"


async def test_a_pause_ends_an_entry() -> None:
    session, sent, _, _ = make_session()
    session.press("7")
    assert not sent.of(msg.TextItemAdded), "the caller may press more keys"
    await wait_for(sent, msg.TextItemAdded, timeout_s=4)  # keypad_pause_ms, 1.5 s
    assert sent.nth(msg.TextItemAdded).text == entry_text("7")


async def test_an_entry_cuts_the_playing_reply_short_and_is_answered() -> None:
    session, sent, _, engines = make_session()
    assert isinstance(engines.llm, FakeLLM)
    session.items.add("user", "Read me the menu.")
    session.create_response()
    await wait_for(sent, msg.ReplyAudioStarted)
    session.press("1")
    session.press("#")
    await wait_for(sent, msg.ReplyEnded, count=2)
    first, second = sent.of(msg.ReplyEnded)
    assert first.status == "cancelled" and second.status == "completed"
    assert engines.llm.prompts[1][-1] == {"role": "user", "content": "[keypad: 1#]"}


async def test_without_create_response_an_entry_is_kept_but_not_answered() -> None:
    session, sent, _, _ = make_session()
    session.configure(OptionChanges(turn_detection=TurnDetectionChange(create_response=False)))
    session.press("5")
    session.press("#")
    assert [m.text for m in sent.of(msg.TextItemAdded)] == [entry_text("5#")]
    assert "ReplyStarted" not in kinds(sent)


@pytest.mark.parametrize("key", ["x", "12", "", "\u0661"])
async def test_what_is_not_a_key_is_refused_and_nothing_happens(key: str) -> None:
    session, sent, _, _ = make_session()
    with pytest.raises(ValueError, match="not a keypad key"):
        session.press(key)
    assert list(sent) == []
