"""While a reply plays, the LLM reads the next turn's prompt up to the user's words, and
while the user speaks, their words so far."""

from __future__ import annotations

import asyncio

from app.session import messages as msg
from app.session.listening.words_so_far import FIRST_MS
from app.session.options import OptionChanges
from tests.session.fakes import FakeLLM, FakeSTT, make_session, noise, silence, wait_for
from tests.session.test_tools import WEATHER


async def test_the_next_prompt_starts_with_what_was_read_ahead() -> None:
    session, sent, _, engines = make_session()
    llm = engines.llm
    assert isinstance(llm, FakeLLM)
    session.items.add("user", "Where is Paris?")
    session.create_response()
    await wait_for(sent, msg.ReplyEnded)  # read ahead as it began to play, before its end
    [ahead] = llm.read_ahead_prompts
    said = next(m for m in sent if isinstance(m, msg.ReplyEnded)).text
    assert ahead[-2:] == [
        {"role": "user", "content": "Where is Paris?"},
        {"role": "assistant", "content": said},
    ]
    session.items.add("user", "And Rome?")
    session.create_response()
    await wait_for(sent, msg.ReplyEnded, 2)
    assert llm.prompts[1] == [*ahead, {"role": "user", "content": "And Rome?"}]
    await session.close()


async def test_nothing_is_read_ahead_for_a_session_with_tools() -> None:
    # A reply with tools gives the LLM another prompt each round: nothing to read ahead.
    session, sent, _, engines = make_session()
    llm = engines.llm
    assert isinstance(llm, FakeLLM)
    session.configure(OptionChanges(tools=(WEATHER,), tool_choice="none"))
    session.items.add("user", "Where is Paris?")
    session.create_response()
    await wait_for(sent, msg.ReplyEnded)
    await asyncio.sleep(0.1)
    assert llm.prompts and llm.read_ahead_prompts == []
    await session.close()


async def test_a_spoken_turn_where_the_window_moves_starts_as_read_ahead() -> None:
    # At 19 messages of a 20-message prompt, a reply and the user's next words move the
    # window. A turn answered before it has ended (speculation) must see it moved as the
    # read-ahead did, or it reads the whole conversation again.
    session, sent, _, engines = make_session()
    llm = engines.llm
    assert isinstance(llm, FakeLLM)
    for n in range(9):
        session.items.add("user", f"question {n}")
        session.items.add("assistant", f"answer {n}")
    session.items.add("user", "question 9")
    session.create_response()
    await wait_for(sent, msg.ReplyEnded)
    [ahead] = llm.read_ahead_prompts
    assert ahead[1] == {"role": "assistant", "content": "answer 5"}, "the window moved"
    session.push_audio(silence(300) + noise(800) + silence(300))  # paused, not ended
    for _ in range(400):  # until the speculative reply has its prompt
        if len(llm.prompts) == 2:
            break
        await asyncio.sleep(0.005)
    assert len(session.history) == 20, "asked before the turn was in history"
    session.push_audio(silence(300))
    await wait_for(sent, msg.ReplyEnded, 2)
    spoken = llm.prompts[1]
    assert spoken[: len(ahead)] == ahead and spoken[-1]["role"] == "user", spoken


async def test_a_closed_session_reads_nothing_ahead() -> None:
    session, sent, _, engines = make_session()
    llm = engines.llm
    assert isinstance(llm, FakeLLM)
    session.items.add("user", "Where is Paris?")
    session.create_response()
    await wait_for(sent, msg.ReplyAudioStarted)
    await session.close()
    assert llm.read_ahead_prompts == [], "a reply cut by the close reads nothing ahead"


QUESTION = ["What", "is", "the", "capital", "of", "France?"]


async def test_the_user_s_words_so_far_are_read_while_they_speak() -> None:
    # Whisper's brief look hears a word per 300 ms spoken, the last maybe cut in two: the
    # LLM reads the words before it, each look's prompt the start of the turn's.
    session, sent, _, engines = make_session()
    llm, stt = engines.llm, engines.stt
    assert isinstance(llm, FakeLLM) and isinstance(stt, FakeSTT)
    llm.reads_ahead = True
    stt.brief_for = lambda ms: " ".join(QUESTION[: ms // 300])
    stt.script = [" ".join(QUESTION)]
    session.items.add("user", "Hello.")
    session.items.add("assistant", "Hi, how can I help?")
    for _ in range(100):  # two seconds of speech, 20 ms a frame as a call sends it
        session.push_audio(noise(20))
        await asyncio.sleep(0.002)
    for _ in range(40):
        session.push_audio(silence(20))
    await wait_for(sent, msg.ReplyEnded)
    asked = llm.prompts[-1]
    assert asked[-1] == {"role": "user", "content": " ".join(QUESTION)}
    assert len(llm.so_far_prompts) >= 2, llm.so_far_prompts
    for so_far in llm.so_far_prompts:
        *before, words = so_far
        assert before == asked[:-1] and words["role"] == "user"
        assert asked[-1]["content"].startswith(words["content"] + " "), words
    # Not before FIRST_MS of speech; each look leaves its last word, maybe cut, unread.
    assert stt.briefly_heard[0] >= 32 * FIRST_MS
    firsts = [len(p[-1]["content"].split()) for p in llm.so_far_prompts]
    assert firsts[0] == stt.briefly_heard[0] // 32 // 300 - 1 and firsts == sorted(firsts)


async def test_nothing_is_heard_early_for_an_llm_that_does_not_read_ahead() -> None:
    # vLLM caches prefixes itself: a brief look would be CPU spent for nothing.
    session, sent, _, engines = make_session()
    llm, stt = engines.llm, engines.stt
    assert isinstance(llm, FakeLLM) and isinstance(stt, FakeSTT)
    for _ in range(100):
        session.push_audio(noise(20))
        await asyncio.sleep(0.002)
    session.push_audio(silence(800))
    await wait_for(sent, msg.ReplyEnded)
    assert stt.briefly_heard == [] and llm.so_far_prompts == []
