"""While a reply plays, the LLM reads the next turn's prompt up to the user's words."""

from __future__ import annotations

import asyncio

from app.session import messages as msg
from app.session.options import OptionChanges
from tests.session.fakes import FakeLLM, make_session, wait_for
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
