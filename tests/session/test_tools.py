"""Tool calls through a session, with engine doubles: the call as an output item, the
client's answer, the spoken reply that uses it, and the ways it can go wrong."""

from __future__ import annotations

import asyncio
import json

import pytest

from app.session import messages as msg
from app.session.options import OptionChanges
from app.session.refusals import OptionError
from tests.session.fakes import FakeLLM, FakeTTS, kinds, make_session, noise, silence, wait_for
from tests.session.test_bargein import play_script

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}
FORCED = {"type": "function", "function": {"name": "get_weather"}}


async def test_a_tool_round_trip() -> None:
    session, sent, audio, engines = make_session()
    assert isinstance(engines.llm, FakeLLM)
    session.configure(OptionChanges(tools=(WEATHER,), tool_choice=FORCED))
    session.push_audio(silence(300) + noise(800) + silence(700))
    await wait_for(sent, msg.ReplyEnded)
    assert engines.llm.tools[0] == ([WEATHER], FORCED), "the LLM was offered the tool"
    ended = sent.nth(msg.ReplyEnded)
    assert ended.status == "completed" and ended.message is None, "a call, and no words"
    (call,) = ended.calls
    assert (call.name, json.loads(call.arguments), call.complete) == (
        "get_weather", {"city": "Paris"}, True,
    )  # fmt: skip
    assert [m.delta for m in sent.of(msg.FunctionCallArguments)] == ['{"city": ', '"Paris"}']
    assert audio.writes == [], "a call makes no sound"

    # The client runs the tool and answers; the next reply is spoken, knowing the result.
    session.items.add_tool_output(call.call_id, '{"sky": "clear", "celsius": 21}')
    session.create_response()
    await wait_for(sent, msg.ReplyEnded, count=2)
    prompt = engines.llm.prompts[-1]
    assert prompt[-2] == {"role": "assistant", "content": None, "tool_calls": [{
        "id": call.call_id, "type": "function",
        "function": {"name": "get_weather", "arguments": call.arguments}}]}  # fmt: skip
    assert prompt[-1] == {
        "role": "tool", "tool_call_id": call.call_id, "content": '{"sky": "clear", "celsius": 21}'
    }  # fmt: skip
    assert sent.nth(msg.ReplyEnded, 1).text.startswith("Sure") and audio.writes
    assert engines.llm.tools[-1] == ([WEATHER], "none"), (
        "forced to call in answer to the user, not in answer to the call's own result"
    )


async def test_a_response_offers_its_own_functions_to_itself_alone() -> None:
    session, sent, _, engines = make_session()
    assert isinstance(engines.llm, FakeLLM)
    session.items.add("user", "Weather in Paris?")
    with pytest.raises(OptionError) as refused:
        session.create_response(changes=OptionChanges(tool_choice=FORCED))
    assert refused.value.option == "response.tool_choice", "no such function here"
    session.create_response(changes=OptionChanges(tools=(WEATHER,), tool_choice=FORCED))
    await wait_for(sent, msg.ReplyEnded)
    assert engines.llm.tools[0] == ([WEATHER], FORCED)
    (call,) = sent.nth(msg.ReplyEnded).calls
    assert call.name == "get_weather" and session.options.tools == ()
    session.items.add_tool_output(call.call_id, "Sunny.")
    session.create_response()
    await wait_for(sent, msg.ReplyEnded, count=2)
    assert engines.llm.tools[1] == (None, "auto"), "the session's own, which are none"


async def test_a_barge_in_during_a_call_cuts_it() -> None:
    session, sent, _, engines = make_session()
    assert isinstance(engines.llm, FakeLLM)
    engines.llm.arguments = ['{"city"', ": ", '"Paris"', "}"] * 10
    engines.llm.delay_s = 0.1  # arguments still coming when the user speaks
    session.configure(OptionChanges(tools=(WEATHER,)))
    await play_script(session, [(0.0, noise(800)), (0.8, silence(800)), (1.6, noise(600)),
                                (2.2, silence(100))])  # fmt: skip
    await wait_for(sent, msg.ReplyEnded)
    ended = sent.nth(msg.ReplyEnded)
    assert ended.status == "cancelled" and not ended.calls[0].complete
    assert session.history.find(ended.calls[0].item_id) is None, "half a call is no call"
    for _ in range(200):  # the cancelled task closes the stream as it unwinds
        if engines.llm.closed_early:
            break
        await asyncio.sleep(0.01)
    assert engines.llm.closed_early == 1


async def test_arguments_that_do_not_parse_fail_the_reply() -> None:
    session, sent, _, engines = make_session()
    assert isinstance(engines.llm, FakeLLM)
    engines.llm.arguments = ['{"city": Par', "is"]
    session.configure(OptionChanges(tools=(WEATHER,)))
    session.push_audio(silence(300) + noise(800) + silence(700))
    await wait_for(sent, msg.ReplyEnded)
    ended = sent.nth(msg.ReplyEnded)
    assert ended.status == "failed" and not ended.calls[0].complete
    assert [p.code for p in sent.of(msg.Problem)] == ["invalid_tool_arguments"]
    assert session.history.find(ended.calls[0].item_id) is None


async def test_a_tool_that_never_answers_does_not_break_the_next_turn() -> None:
    session, sent, _, engines = make_session()
    assert isinstance(engines.llm, FakeLLM) and isinstance(engines.tts, FakeTTS)
    session.configure(OptionChanges(tools=(WEATHER,)))
    session.push_audio(silence(300) + noise(800) + silence(700))
    await wait_for(sent, msg.ReplyEnded)
    # No function_call_output ever comes; the tools go, and the user speaks again.
    session.configure(OptionChanges(tools=()))
    session.push_audio(noise(800) + silence(700))
    await wait_for(sent, msg.ReplyEnded, count=2)
    assert sent.nth(msg.ReplyEnded, 1).status == "completed"
    prompt = engines.llm.prompts[-1]
    assert not [m for m in prompt if m.get("tool_calls") or m["role"] == "tool"], (
        "an unanswered call is left out of the prompt"
    )
    assert "ToolOutputAdded" not in kinds(sent)
