"""MCP tools through a session: a real MCP server (the tests' own, on the `mcp` SDK over
streamable HTTP), with the LLM and voice doubled, since what is tested is the order of
things. The LLM double calls the first tool it is offered, and answers in words once
the last message is a tool's result."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncGenerator, Iterator
from typing import Any

import pytest

from app.config import Settings
from app.config.tools import ToolsSettings
from app.session import messages as msg
from app.session.options import OptionChanges
from app.session.refusals import OptionError
from app.tools.mcp_link import McpLink
from app.tools.servers import ToolServers
from app.tools.specs import McpSpec
from app.vocab.chat import ChatMessage, Delta, ToolCallDelta
from tests.session.fakes import FakeLLM, make_session, noise, silence, wait_for
from tests.support.mcp_server import McpHttpServer


@pytest.fixture(scope="module")
def mcp_server() -> Iterator[McpHttpServer]:
    server = McpHttpServer().start()
    yield server
    server.stop()


def servers(**settings: object) -> ToolServers:
    return ToolServers(ToolsSettings(mcp_allowed_urls=["http://127.0.0.1:*/mcp"], **settings))


def orders(url: str, tool: str = "order_status", approval: str = "never") -> McpSpec:
    return McpSpec(
        "orders", url=url, allowed=frozenset({tool}),
        always=None if approval == "always" else frozenset(),
    )  # fmt: skip


def ask(session_audio: object) -> None:
    session_audio.push_audio(silence(300) + noise(800) + silence(700))  # type: ignore[attr-defined]


async def test_the_server_calls_the_tool_and_says_its_result(mcp_server: McpHttpServer) -> None:
    session, sent, audio, engines = make_session(tools=servers(filler_after_ms=5000))
    assert isinstance(engines.llm, FakeLLM)
    engines.llm.arguments = ['{"order": ', '"42"}']
    session.configure(OptionChanges(tools=(), servers=(orders(mcp_server.url),)))
    await wait_for(sent, msg.ToolsListed)
    listed = sent.nth(msg.ToolsListed)
    assert listed.error is None and [t["name"] for t in listed.tools] == ["order_status"]

    ask(session)
    await wait_for(sent, msg.ReplyEnded)
    ended = sent.nth(msg.ReplyEnded)
    assert ended.status == "completed", ended
    (call,) = ended.calls
    assert (call.server, call.name, json.loads(call.arguments)) == (
        "orders", "order_status", {"order": "42"},
    )  # fmt: skip
    assert call.output == "Order 42 has shipped and arrives on Tuesday."
    assert ended.message is not None and ended.message.output_index == 1, "words after it"
    # The LLM read the result in its second round, within the same reply.
    assert engines.llm.prompts[-1][-1] == {
        "role": "tool", "tool_call_id": call.call_id, "content": call.output,
    }  # fmt: skip
    order = [type(m) for m in sent if isinstance(m, (msg.FunctionCallStarted,
             msg.ServerCallRunning, msg.ServerCallEnded, msg.MessageStarted))]  # fmt: skip
    assert order == [msg.FunctionCallStarted, msg.ServerCallRunning, msg.ServerCallEnded,
                     msg.MessageStarted]  # fmt: skip
    assert audio.writes, "and it was spoken"
    assert session.history.find(call.item_id) is not None
    assert "Let me check." not in ended.text, "no filler: the words came sooner"


async def test_a_url_not_allowed_is_refused_before_any_request(
    mcp_server: McpHttpServer,
) -> None:
    session, sent, _, _ = make_session(tools=ToolServers(ToolsSettings()))
    before = mcp_server.requests
    with pytest.raises(OptionError, match="not one this server allows"):
        session.configure(OptionChanges(tools=(), servers=(orders(mcp_server.url),)))
    assert session.options.servers == ()
    assert mcp_server.requests == before, "the server heard nothing"
    assert not sent.of(msg.ToolsListing)


@pytest.mark.parametrize(
    ("tool", "heard"),
    [
        ("broken", "Sorry, the orders system could not do that."),
        ("hang", "Sorry, the orders system did not answer in time."),
    ],
)
async def test_a_failing_tool_is_told_in_speech_and_the_next_turn_works(
    mcp_server: McpHttpServer, tool: str, heard: str
) -> None:
    session, sent, audio, engines = make_session(
        tools=servers(call_timeout_s=0.5, filler_after_ms=0)
    )
    assert isinstance(engines.llm, FakeLLM)
    engines.llm.arguments = ['{"order": "7"}']
    session.configure(OptionChanges(tools=(), servers=(orders(mcp_server.url, tool),)))
    ask(session)
    await wait_for(sent, msg.ReplyEnded)
    ended = sent.nth(msg.ReplyEnded)
    assert ended.text == heard and audio.writes
    assert ended.calls[0].error is not None and ended.calls[0].output is None
    assert sent.nth(msg.ServerCallEnded).call.error == ended.calls[0].error

    session.configure(OptionChanges(tools=(), servers=()))
    ask(session)
    await wait_for(sent, msg.ReplyEnded, count=2)
    assert sent.nth(msg.ReplyEnded, 1).text.startswith("Sure"), "the next turn works"


async def test_a_slow_tool_gets_a_filler_first(mcp_server: McpHttpServer) -> None:
    session, sent, _, engines = make_session(tools=servers(filler_after_ms=300))
    assert isinstance(engines.llm, FakeLLM)
    engines.llm.arguments = ['{"order": "9"}']
    session.configure(OptionChanges(tools=(), servers=(orders(mcp_server.url, "slow_lookup"),)))
    ask(session)
    await wait_for(sent, msg.ReplyEnded)
    ended = sent.nth(msg.ReplyEnded)
    spoken = [m.delta.strip() for m in sent.of(msg.ClauseSpoken)]
    assert spoken[0] == "Let me check.", spoken
    assert ended.status == "completed" and ended.calls[0].output is not None


async def test_a_slow_next_round_gets_a_filler_too(mcp_server: McpHttpServer) -> None:
    """The wait a caller hears is the call and the LLM's round after it: a fast tool and
    a slow model get the filler as well."""
    session, sent, _, engines = make_session(tools=servers(filler_after_ms=100))
    assert isinstance(engines.llm, FakeLLM)
    engines.llm.arguments = ['{"order": "9"}']
    session.configure(OptionChanges(tools=(), servers=(orders(mcp_server.url),)))
    await wait_for(sent, msg.ToolsListed)
    engines.llm.delay_s = 0.25  # a word every 250 ms: the first clause takes a second
    ask(session)
    await wait_for(sent, msg.ReplyEnded)
    spoken = [m.delta.strip() for m in sent.of(msg.ClauseSpoken)]
    assert spoken[0] == "Let me check." and spoken[1].startswith("Sure"), spoken


async def test_a_barge_in_cancels_the_call(mcp_server: McpHttpServer) -> None:
    session, sent, _, engines = make_session(tools=servers(filler_after_ms=0))
    assert isinstance(engines.llm, FakeLLM)
    engines.llm.arguments = ['{"order": "5"}']
    session.configure(OptionChanges(tools=(), servers=(orders(mcp_server.url, "hang"),)))
    ask(session)
    await wait_for(sent, msg.ServerCallRunning)
    assert session.reply is not None
    session.cancel_response()
    await wait_for(sent, msg.ReplyEnded)
    ended = sent.nth(msg.ReplyEnded)
    assert ended.status == "cancelled"
    assert ended.calls[0].output is None and session.history.find(ended.calls[0].item_id) is None
    session.configure(OptionChanges(tools=(), servers=()))
    ask(session)
    await wait_for(sent, msg.ReplyEnded, count=2)
    assert sent.nth(msg.ReplyEnded, 1).status == "completed", "the session goes on"


async def test_a_call_that_needs_approval_is_asked_about_not_run(
    mcp_server: McpHttpServer,
) -> None:
    session, sent, _, engines = make_session(tools=servers())
    assert isinstance(engines.llm, FakeLLM)
    engines.llm.arguments = ['{"order": "3"}']
    spec = orders(mcp_server.url, approval="always")
    session.configure(OptionChanges(tools=(), servers=(spec,)))
    ask(session)
    await wait_for(sent, msg.ReplyEnded)
    ended = sent.nth(msg.ReplyEnded)
    (request,) = ended.approvals
    assert (request.server, request.name, request.arguments) == (
        "orders", "order_status", '{"order": "3"}',
    )  # fmt: skip
    assert ended.calls == () and not sent.of(msg.ServerCallRunning), "not run"

    session.approve(request.item_id, approve=True)
    await wait_for(sent, msg.ReplyEnded, count=2)
    after = sent.nth(msg.ReplyEnded, 1)
    (call,) = after.calls
    assert call.approval_request_id == request.item_id
    assert call.output == "Order 3 has shipped and arrives on Tuesday."
    assert after.message is not None and after.text.startswith("Sure")
    assert after.approvals == (), "approved once is enough"


async def test_a_server_that_is_down_fails_its_listing_and_the_turn_is_answered() -> None:
    session, sent, _, engines = make_session(tools=servers())
    down = McpHttpServer()  # a port nothing listens on
    session.configure(OptionChanges(tools=(), servers=(orders(down.url),)))
    await wait_for(sent, msg.ToolsListed)
    assert "cannot connect" in (sent.nth(msg.ToolsListed).error or "")
    ask(session)
    await wait_for(sent, msg.ReplyEnded)
    ended = sent.nth(msg.ReplyEnded)
    assert ended.status == "completed" and ended.text.startswith("Sure") and not ended.calls
    assert isinstance(engines.llm, FakeLLM) and engines.llm.tools[-1][0] is None


async def test_a_client_function_of_the_same_name_stays_the_clients(
    mcp_server: McpHttpServer,
) -> None:
    session, sent, _, engines = make_session(tools=servers())
    assert isinstance(engines.llm, FakeLLM)
    engines.llm.arguments = ['{"order": "1"}']
    own = {"type": "function", "function": {"name": "order_status", "parameters": {}}}
    session.configure(OptionChanges(tools=(own,), servers=(orders(mcp_server.url),)))
    await wait_for(sent, msg.ToolsListed)
    ask(session)
    await wait_for(sent, msg.ReplyEnded)
    (call,) = sent.nth(msg.ReplyEnded).calls
    assert call.server == "" and not sent.of(msg.ServerCallRunning), "the client runs it"
    assert [t["function"]["name"] for t in engines.llm.tools[0][0] or []] == ["order_status"]


async def test_a_response_uses_its_own_servers_for_itself_alone(
    mcp_server: McpHttpServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # response.create's tools: listed for the response, called, and let go after it; the
    # session's stay as they were. Its call that needs approval still runs once approved.
    closed: list[str] = []
    close = McpLink.aclose

    async def counted(link: McpLink) -> None:
        closed.append(link.spec.label)
        await close(link)

    monkeypatch.setattr(McpLink, "aclose", counted)
    session, sent, _, engines = make_session(tools=servers(filler_after_ms=5000))
    assert isinstance(engines.llm, FakeLLM)
    engines.llm.arguments = ['{"order": "7"}']
    session.items.add("user", "Where is order 7?")
    own = OptionChanges(tools=(), servers=(orders(mcp_server.url),))
    session.create_response(changes=own)
    await wait_for(sent, msg.ReplyEnded)
    ended = sent.nth(msg.ReplyEnded)
    (call,) = ended.calls
    assert call.output == "Order 7 has shipped and arrives on Tuesday."
    assert [t["name"] for t in sent.nth(msg.ToolsListed).tools] == ["order_status"]
    assert session.options.servers == () and session.tools.server_of("order_status") is None
    for _ in range(100):  # let go in the background, not holding up the next turn
        if closed:
            break
        await asyncio.sleep(0.02)
    assert closed == ["orders"], "the response's own link was closed after it"
    session.items.add("user", "Thanks.")
    session.create_response()
    await wait_for(sent, msg.ReplyEnded, count=2)
    assert engines.llm.tools[-1] == (None, "auto"), "the next response has no tools"

    asking = OptionChanges(tools=(), servers=(orders(mcp_server.url, approval="always"),))
    session.create_response(changes=asking)
    await wait_for(sent, msg.ReplyEnded, count=3)
    (request,) = sent.nth(msg.ReplyEnded, 2).approvals
    session.approve(request.item_id, approve=True)
    await wait_for(sent, msg.ReplyEnded, count=4)
    (approved,) = sent.nth(msg.ReplyEnded, 3).calls
    assert approved.approval_request_id == request.item_id
    assert approved.output == "Order 7 has shipped and arrives on Tuesday."


async def test_a_response_naming_a_url_not_allowed_is_refused_before_any_request(
    mcp_server: McpHttpServer,
) -> None:
    session, sent, _, _ = make_session(tools=ToolServers(ToolsSettings()))
    before = mcp_server.requests
    session.items.add("user", "Where is order 7?")
    with pytest.raises(OptionError, match="not one this server allows") as refused:
        session.create_response(changes=OptionChanges(tools=(), servers=(orders(mcp_server.url),)))
    assert refused.value.option == "response.tools"
    assert mcp_server.requests == before and not sent.of(msg.ToolsListing)
    assert not session.busy, "no response was started"


class HeedlessLLM(FakeLLM):
    """Calls the first tool it is offered in every round, whatever tool_choice says, and
    then answers in words (`mute`: never): an LLM server that does not honour
    tool_choice "none"."""

    def __init__(self, mute: bool = False) -> None:
        super().__init__()
        self.mute = mute

    async def stream(  # type: ignore[override]
        self, messages: list[ChatMessage], **options: Any
    ) -> AsyncGenerator[Delta, None]:
        if tools := options.get("tools"):
            yield ToolCallDelta(0, call_id=f"call_{len(self.prompts)}",
                                name=tools[0]["function"]["name"])  # fmt: skip
            yield ToolCallDelta(0, arguments='{"order": "9"}')
            if self.mute:
                return
        async for delta in super().stream(messages, **{**options, "tools": None}):
            yield delta


async def test_a_call_in_a_round_told_to_call_nothing_is_not_followed(
    mcp_server: McpHttpServer,
) -> None:
    session, sent, _, _ = make_session(llm=HeedlessLLM(), tools=servers(filler_after_ms=5000))
    session.configure(OptionChanges(tools=(), servers=(orders(mcp_server.url),)))
    await wait_for(sent, msg.ToolsListed)
    ask(session)
    await wait_for(sent, msg.ReplyEnded)
    ended = sent.nth(msg.ReplyEnded)
    (call,) = ended.calls  # the last round's is not shown, and so not left unrun
    assert call.output == "Order 9 has shipped and arrives on Tuesday."
    assert ended.status == "completed" and ended.text.startswith("Sure")


async def test_a_last_round_with_no_words_is_not_left_silent(mcp_server: McpHttpServer) -> None:
    session, sent, audio, _ = make_session(llm=HeedlessLLM(mute=True), tools=servers())
    session.configure(OptionChanges(tools=(), servers=(orders(mcp_server.url),)))
    await wait_for(sent, msg.ToolsListed)
    ask(session)
    await wait_for(sent, msg.ReplyEnded)
    ended = sent.nth(msg.ReplyEnded)
    assert [c.output is not None for c in ended.calls] == [True]
    assert ended.text == Settings().tts.fallback_speech and audio.writes, "the fallback, said"
