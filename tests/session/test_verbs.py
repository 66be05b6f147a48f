"""The session's verbs and the typed messages they lead to, with engine doubles."""

from __future__ import annotations

import asyncio

import pytest

from app.session import messages as msg
from app.session.options import OptionChanges, TurnDetectionChange
from app.session.refusals import (
    ItemExists,
    ItemInUse,
    NothingToCommit,
    OptionError,
    ResponseInProgress,
    UnknownItem,
)
from tests.session.fakes import FakeLLM, FakeSTT, kinds, make_session, noise, silence, wait_for
from tests.session.test_bargein import play_script


async def test_configure_changes_all_or_nothing() -> None:
    session, sent, _, engines = make_session()
    assert isinstance(engines.llm, FakeLLM)
    session.configure(
        OptionChanges(
            instructions="Speak like a pirate.",
            voice="other",
            speed=1.2,
            turn_detection=TurnDetectionChange(silence_ms=710, aggressiveness=3),
        )
    )
    options = session.options
    assert (options.instructions, options.voice, options.speed) == (
        "Speak like a pirate.", "other", 1.2,
    )  # fmt: skip
    assert options.vad is not None
    assert (options.vad.silence_ms, options.vad.aggressiveness) == (720, 3), "snapped to frames"
    with pytest.raises(OptionError) as refused:
        session.configure(OptionChanges(instructions="Whisper.", voice="nobody"))
    assert refused.value.option == "voice"
    with pytest.raises(OptionError) as refused:
        session.configure(OptionChanges(turn_detection=TurnDetectionChange(silence_ms=20)))
    assert refused.value.option == "turn_detection"
    assert session.options == options, "a refused change leaves everything as it was"
    # The instructions are the prompt's system message.
    session.items.add("user", "Ahoy?")
    session.create_response()
    await wait_for(sent, msg.ReplyEnded)
    assert engines.llm.prompts[0][0] == {"role": "system", "content": "Speak like a pirate."}
    await session.close()


async def test_without_create_response_a_turn_is_kept_but_not_answered() -> None:
    session, sent, _, _ = make_session()
    session.configure(OptionChanges(turn_detection=TurnDetectionChange(create_response=False)))
    session.push_audio(silence(300) + noise(800) + silence(1000))
    await wait_for(sent, msg.UserTranscribed)
    await asyncio.sleep(0.2)
    assert "ReplyStarted" not in kinds(sent) and len(session.history) == 1
    await session.close()


async def test_manual_turns_commit_clear_and_delete() -> None:
    session, sent, _, engines = make_session()
    assert isinstance(engines.stt, FakeSTT)
    session.configure(OptionChanges(manual_turns=True))
    assert session.options.vad is None
    session.push_audio(noise(600))
    session.clear_input()
    with pytest.raises(NothingToCommit):
        session.commit_input()
    session.push_audio(noise(600))
    session.commit_input()
    await wait_for(sent, msg.ReplyEnded)
    assert "SpeechStarted" not in kinds(sent), "no VAD in manual mode"
    assert engines.stt.heard == [600 * 32]
    committed = sent.nth(msg.InputCommitted)
    assert sent.nth(msg.UserTranscribed).item_id == committed.item_id
    session.items.delete(committed.item_id)
    assert sent[-1] == msg.ItemDeleted(committed.item_id)
    assert [m.role for m in session.history.messages()] == ["assistant"]
    with pytest.raises(UnknownItem):
        session.items.delete(committed.item_id)
    # Back to automatic turns: the VAD hears the next one by itself.
    session.configure(OptionChanges(turn_detection=TurnDetectionChange()))
    session.push_audio(silence(300) + noise(800) + silence(700))
    await wait_for(sent, msg.ReplyEnded, count=2)
    await session.close()


async def test_typed_items_and_one_response_at_a_time() -> None:
    session, sent, audio, engines = make_session()
    assert isinstance(engines.llm, FakeLLM)
    session.items.add("system", "Be kind.", "item_sys")
    session.items.add("user", "Hello there")
    with pytest.raises(ItemExists):
        session.items.add("user", "Again", "item_sys")
    added = sent.of(msg.TextItemAdded)
    assert [(m.item_id, m.role, m.previous_item_id) for m in added][0] == (
        "item_sys", "system", None,
    )  # fmt: skip
    assert added[1].previous_item_id == "item_sys"
    session.create_response("Be brief.")
    with pytest.raises(ResponseInProgress):
        session.create_response()
    await wait_for(sent, msg.ReplyAudioStarted)
    reply = session.reply
    assert reply is not None
    with pytest.raises(ItemInUse):
        session.items.delete(reply.item_id)
    await wait_for(sent, msg.ReplyEnded)
    assert engines.llm.prompts[0] == [
        {"role": "system", "content": "Be brief."},
        {"role": "system", "content": "Be kind."},
        {"role": "user", "content": "Hello there"},
    ]
    ended = sent.nth(msg.ReplyEnded)
    assert ended.status == "completed" and ended.text == "Sure, here is the answer you asked for."
    spoken = "".join(m.delta for m in sent.of(msg.ClauseSpoken))
    assert spoken == ended.text
    assert kinds(sent)[-2:] == ["ReplyAudioStopped", "ReplyEnded"]
    assert audio.writes, "the reply was spoken"
    await session.close()


async def test_without_create_response_a_speculative_turn_is_not_answered_either() -> None:
    """Spoken in real time, the transcript is ready before the turn ends."""
    session, sent, audio, _ = make_session()
    session.configure(OptionChanges(turn_detection=TurnDetectionChange(create_response=False)))
    await play_script(session, [(0.0, silence(300)), (0.3, noise(800)), (1.1, silence(1000))])
    await wait_for(sent, msg.UserTranscribed)
    await asyncio.sleep(0.3)
    assert "ReplyStarted" not in kinds(sent) and audio.writes == []
    assert len(session.history) == 1
    await session.close()


async def test_the_next_reply_may_be_asked_for_the_moment_the_last_one_ends() -> None:
    """A client sends response.create as soon as it reads response.done; the ended reply's
    task may still be winding down then, and must not count as a response in progress."""
    asked: list[str] = []

    def ask_again(message: msg.SessionMessage) -> None:
        if isinstance(message, msg.ReplyEnded) and not asked:
            try:
                session.create_response()
                asked.append("accepted")
            except ResponseInProgress as exc:
                asked.append(f"refused: {exc}")

    session, sent, _, _ = make_session(also=ask_again)
    session.items.add("user", "Ahoy?")
    session.create_response()
    await wait_for(sent, msg.ReplyEnded, count=2)
    assert asked == ["accepted"]
    assert [m.status for m in sent.of(msg.ReplyEnded)] == ["completed", "completed"]
    await session.close()


@pytest.mark.parametrize("speculative_ms", [0, 200])
async def test_the_llm_hears_each_turn_once_whether_or_not_it_was_speculated(
    speculative_ms: int,
) -> None:
    session, sent, _, engines = make_session(speculative_ms=speculative_ms)
    assert isinstance(engines.llm, FakeLLM) and isinstance(engines.stt, FakeSTT)
    engines.stt.script = ["first question", "second question"]
    for _ in range(2):
        await play_script(session, [(0.0, noise(800)), (0.8, silence(800))])
        await wait_for(sent, msg.ReplyEnded, count=len(engines.llm.prompts), timeout_s=10)
    said = [m for m in engines.llm.prompts[-1] if m["role"] == "user"]
    assert said == [
        {"role": "user", "content": "first question"},
        {"role": "user", "content": "second question"},
    ]
    await session.close()
