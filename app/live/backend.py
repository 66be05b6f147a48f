"""A Live session's Responses backend, run here: a second call to the server's own LLM
with the backend's instructions and tools, streamed to the client as `response.event`s
in the Responses API's words. Its function calls are the client's: a response that makes
one ends, and the client's `response.item.create` (the output) and `response.create`
go on. Its MCP servers' tools are run here, in the same response. An answer in words
is spoken by the voice."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from app.errors import EngineError
from app.ids import new_id, shown
from app.live import server_events as events
from app.live.client_events import BadEvent
from app.live.responses import ResponseStream
from app.live.session_config import ResponsesBackend, backend_servers, backend_tools
from app.session.server_tools import ServerTools
from app.session.session import Session
from app.tasks import spawn
from app.tools.mcp_link import ToolFailure
from app.tools.specs import McpSpec
from app.vocab.chat import ChatMessage, Tool, ToolCallDelta, ToolCallRequest, ToolChoice

log = logging.getLogger(__name__)

MAX_BACKEND_MESSAGES = 64  # the backend conversation's, after its instructions
CONTEXT_MESSAGES = 12  # of the voice's conversation, told to the backend
MAX_ASKING = 16  # calls waiting for the client's approval
COULD_NOT = "Sorry, I could not get an answer to that."
BACKEND_INSTRUCTIONS = "You are the helper of a voice assistant. Do the task; answer briefly."


@dataclass(slots=True)
class PendingCall:
    call_id: str
    name: str = ""
    arguments: list[str] = field(default_factory=list)
    index: int = 0  # among the response's output items
    item_id: str = ""
    server: str = ""  # an MCP server's tool, run here; empty: the client's function
    asks: bool = False  # the client must approve it first


class Backend:
    def __init__(
        self,
        session: Session,
        config: Callable[[], ResponsesBackend],
        *,
        send: Callable[[events.Event], None],
        speak: Callable[[str], None],
        answered: Callable[[str], None],
    ) -> None:
        """`config`: the backend's settings as they are now; `send`: an event to everyone;
        `speak`: words for the agent to say; `answered`: a delegation the backend answered."""
        self._session = session
        self._config = config
        self._send = send
        self._speak = speak
        self._answered = answered
        self._backend: list[ChatMessage] = []  # its conversation
        # Its responses being made, one at a time: each waits for the one before.
        self._runs: list[asyncio.Task[None]] = []
        self._rounds = 0  # LLM rounds it made, held to limits.delegation_rounds
        self._waiting: str | None = None  # the delegation whose backend awaits the client
        self._servers: ServerTools | None = None  # its MCP servers, once it has any
        self._functions: frozenset[str] = frozenset()  # its client-run functions
        self._listed: set[str] = set()  # the listings told in a response (their item ids)
        # Calls waiting for the client's approval, by request id; and those answered,
        # run (or not) at the start of the next response.
        self._asking: dict[str, PendingCall] = {}
        self._answers: list[tuple[str, PendingCall, bool]] = []

    def begin(self, delegation_id: str, task: str) -> str:
        """A delegated task: the backend's response to it starts; returns the response id."""
        stream = self._stream()
        self._backend_add({"role": "user", "content": self._brief(task)})
        self._respond(stream, delegation_id)
        return stream.id

    def add_item(self, item: dict[str, object]) -> None:
        """response.item.create: a message or a function call's output for the backend."""
        kind = item.get("type", "message")
        if kind == "mcp_approval_response":
            self._approval(item)
        elif kind == "function_call_output":
            call_id, output = item.get("call_id"), item.get("output")
            if not isinstance(call_id, str) or not isinstance(output, str):
                raise BadEvent("a function_call_output needs call_id and output (strings)",
                               "invalid_value", "item")  # fmt: skip
            self._within(output, "item.output")
            self._backend_add({"role": "tool", "tool_call_id": call_id, "content": output})
        elif kind == "message" and item.get("role") in ("user", "developer", "system"):
            text = _text_of(item.get("content"))
            self._within(text, "item.content")
            role = "user" if item.get("role") == "user" else "system"
            self._backend_add({"role": role, "content": text})
        else:
            raise BadEvent(
                "the backend takes a message (user or developer), a function_call_output or "
                "an mcp_approval_response", "invalid_value", "item.type",
            )  # fmt: skip

    def _approval(self, item: dict[str, object]) -> None:
        """The client's answer to an approval request: the call runs (or is told it may
        not) at the start of the next response."""
        request_id, approve = item.get("approval_request_id"), item.get("approve")
        if not isinstance(approve, bool):
            raise BadEvent("an mcp_approval_response needs approve (true or false)",
                           "invalid_value", "item.approve")  # fmt: skip
        call = self._asking.pop(request_id, None) if isinstance(request_id, str) else None
        if call is None:
            raise BadEvent(f"no mcp_approval_request {shown(str(request_id))} is waiting",
                           "invalid_value", "item.approval_request_id")  # fmt: skip
        self._answers.append((str(request_id), call, approve))

    def create_response(self) -> None:
        """response.create: the backend answers its conversation as it stands."""
        if any(not run.done() for run in self._runs):
            raise BadEvent("the backend is already making a response", "invalid_request")
        self._respond(self._stream(), self._waiting)

    def _within(self, text: str, param: str) -> None:
        most = self._session.limits.item_chars
        if len(text) > most:
            raise BadEvent(f"{param} is longer than {most} characters", "invalid_value", param)

    def close(self) -> None:
        for run in self._runs:
            run.cancel()
        self._runs.clear()
        if self._servers is not None:
            spawn(self._servers.aclose(), f"{self._session.id}:backend-tools")
            self._servers = None

    def _stream(self) -> ResponseStream:
        return ResponseStream(self._config().model or "server")

    def _backend_add(self, message: ChatMessage) -> None:
        self._backend.append(message)
        del self._backend[:-MAX_BACKEND_MESSAGES]

    def _brief(self, task: str) -> str:
        """The task, with what the voice's conversation says before it."""
        said = [m for m in self._session.history.messages() if m.role in ("user", "assistant")]
        lines = [f"{m.role}: {m.content}" for m in said[-CONTEXT_MESSAGES:] if m.content]
        context = "The conversation so far:\n" + "\n".join(lines) + "\n\n" if lines else ""
        return f"{context}Task: {task}"

    def _respond(self, stream: ResponseStream, delegation_id: str | None) -> None:
        if not self._session.backend.available:
            raise BadEvent("this agent has no model to run a backend", "invalid_request")
        self._runs = [run for run in self._runs if not run.done()]
        before = self._runs[-1] if self._runs else None
        name = f"{self._session.id}:backend"
        self._runs.append(spawn(self._run_after(before, stream, delegation_id), name))

    async def _run_after(
        self, before: asyncio.Task[None] | None, stream: ResponseStream, delegation_id: str | None
    ) -> None:
        if before is not None:
            await asyncio.wait([before])  # however it ended; a cancel of this one still cancels
        await self._run(stream, delegation_id)

    async def _run(self, stream: ResponseStream, delegation_id: str | None) -> None:
        backend = self._config()
        limits = self._session.limits
        system: ChatMessage = {"role": "system",
                               "content": backend.instructions or BACKEND_INSTRUCTIONS}  # fmt: skip
        tools = backend_tools(backend, limits)
        self._functions = frozenset(tool["function"]["name"] for tool in tools)
        servers = self._servers_for(backend_servers(backend))
        if servers is not None:
            await servers.ready()
            tools += servers.chat_tools({tool["function"]["name"] for tool in tools})
        tokens = self._session.usage.tokens
        before = (tokens.prompt, tokens.completion)

        def out(nested: dict[str, object]) -> None:
            self._send(events.response_event(nested, delegation_id))

        out(stream.created())
        output = _Output()
        if servers is not None:
            self._tell_listings(servers, stream, out, output)
        if self._rounds >= limits.delegation_rounds:
            # A client answering each call with another cannot keep the LLM busy for ever.
            spent = f"this session's delegations made {limits.delegation_rounds} rounds, the most"
            out(stream.failed("delegation_limit", spent))
            self._speak(COULD_NOT)
            return
        self._rounds += 1
        max_tokens = min(backend.max_output_tokens or limits.delegation_tokens,
                         limits.delegation_tokens)  # fmt: skip
        tool_choice = backend.tool_choice if tools else None
        max_rounds = servers.settings.max_rounds if servers is not None else 0
        try:
            async with asyncio.timeout(limits.delegation_s):
                # An approved call is the response's round of calls, as in Realtime.
                first = 1 if await self._run_answered(servers, stream, out, output) else 0
                for round_ in range(first, max_rounds + 1):
                    last = round_ >= max_rounds
                    ran = await self._round(
                        [system, *self._backend], tools or None,
                        "none" if last and round_ else tool_choice,
                        max_tokens, stream, out, output, servers,
                    )  # fmt: skip
                    if not ran:
                        break
        except EngineError as exc:
            log.warning("backend failed: %s", exc, extra={"session_id": self._session.id})
            out(stream.failed(exc.code, str(exc)))
            self._speak(COULD_NOT)
            return
        except TimeoutError:
            took = f"the backend took longer than {limits.delegation_s:g} s"
            out(stream.failed("delegation_timeout", took))
            self._speak(COULD_NOT)
            return
        out(stream.completed(tokens.prompt - before[0], tokens.completion - before[1]))
        answer = output.answer
        if output.client_calls or output.asked:
            self._waiting = delegation_id  # the client runs the calls, then response.create
        elif answer:
            self._waiting = None
            if delegation_id is not None:
                self._answered(delegation_id)
            self._speak(answer)

    async def _round(
        self,
        prompt: list[ChatMessage],
        tools: list[Tool] | None,
        tool_choice: ToolChoice | None,
        max_tokens: int,
        stream: ResponseStream,
        out: Callable[[dict[str, object]], None],
        output: _Output,
        servers: ServerTools | None,
    ) -> bool:
        """One call to the LLM, and the servers' tools it calls run; True if it should go
        on with their results."""
        text: list[str] = []
        calls: dict[int, PendingCall] = {}
        message_id, message_index = new_id("msg"), -1
        deltas = self._session.backend.ask(
            prompt, tools=tools, tool_choice=tool_choice, max_tokens=max_tokens,
            request_id=stream.id,
        )  # fmt: skip
        async with contextlib.aclosing(deltas):
            async for delta in deltas:
                if isinstance(delta, ToolCallDelta):
                    if tool_choice != "none":  # an LLM server that calls anyway: not followed
                        self._call_part(calls, delta, stream, out, output, servers)
                else:
                    if not text:
                        message_index = output.next()
                        out(stream.message_added(message_id, message_index))
                    text.append(delta)
                    out(stream.text_delta(message_id, message_index, delta))
        answer = "".join(text).strip()
        if text:
            for nested in stream.message_done(message_id, message_index, answer):
                out(nested)
            self._backend_add({"role": "assistant", "content": answer})
            output.answer = answer
        client = {n: call for n, call in calls.items() if not call.server}
        if client:
            self._calls_done(client, stream, out)
            output.client_calls = True
        asked = [call for call in calls.values() if call.server and call.asks]
        for call in asked:
            call.index = output.next()  # added now, after the items before it
            described = (call.server, call.name, "".join(call.arguments))
            for nested in stream.approval_requested(call.item_id, call.index, described):
                out(nested)
            self._asking[call.item_id] = call
            while len(self._asking) > MAX_ASKING:  # bounded: the oldest is forgotten
                self._asking.pop(next(iter(self._asking)))
        output.asked |= bool(asked)
        ran = [call for call in calls.values() if call.server and not call.asks]
        for call in ran:
            assert servers is not None
            await self._run_call(call, servers, stream, out)
        return bool(ran) and not client and not asked

    async def _run_answered(
        self,
        servers: ServerTools | None,
        stream: ResponseStream,
        out: Callable[[dict[str, object]], None],
        output: _Output,
    ) -> bool:
        """The calls the client answered since the last response: an approved one runs (its
        mcp_call names the request), a refused one is told to the LLM as refused. True if
        one ran."""
        answers, self._answers = self._answers, []
        ran = False
        for request_id, call, approve in answers:
            if not approve or servers is None:
                why = "the user did not approve it" if approve is False else "no such server now"
                self._told(call, f"The call was not run: {why}.")
                continue
            call.item_id, call.index = new_id("mcp"), output.next()
            out(stream.mcp_call_added(call.item_id, call.index, call.server, call.name,
                                      approved=request_id))  # fmt: skip
            await self._run_call(call, servers, stream, out, approved=request_id)
            ran = True
        return ran

    def _tell_listings(
        self,
        servers: ServerTools,
        stream: ResponseStream,
        out: Callable[[dict[str, object]], None],
        output: _Output,
    ) -> None:
        """Each server's tools, in the first response after they were listed, as the
        Responses API's mcp_list_tools item."""
        listings = servers.listings()
        for item_id, label, tools, error in listings:
            if item_id not in self._listed:
                for nested in stream.tools_listed(item_id, output.next(), label, tools, error):
                    out(nested)
        self._listed = {item_id for item_id, *_ in listings}

    async def _run_call(
        self,
        call: PendingCall,
        servers: ServerTools,
        stream: ResponseStream,
        out: Callable[[dict[str, object]], None],
        approved: str | None = None,
    ) -> None:
        """A call of an MCP server's tool, run here: its result goes back to the LLM.
        `approved`: the approval request's id, for a call the client approved."""
        arguments = "".join(call.arguments)
        for nested in stream.mcp_call_running(call.item_id, call.index, arguments):
            out(nested)
        output: str | None = None
        error: dict[str, Any] | None = None
        try:
            output = await servers.call(call.server, call.name, arguments)
        except ToolFailure as exc:
            error = exc.as_error()
        described = (call.server, call.name, arguments)
        for nested in stream.mcp_call_done(
            call.item_id, call.index, described, output, error, approved
        ):
            out(nested)
        self._told(call, output if output is not None else
                   f"The call failed: {(error or {}).get('message')}")  # fmt: skip

    def _told(self, call: PendingCall, result: str) -> None:
        """The call and its result, in the backend's conversation."""
        function = {"name": call.name, "arguments": "".join(call.arguments)}
        request: ToolCallRequest = {"id": call.call_id, "type": "function", "function": function}
        self._backend_add({"role": "assistant", "content": None, "tool_calls": [request]})
        self._backend_add({"role": "tool", "tool_call_id": call.call_id, "content": result})

    def _servers_for(self, specs: tuple[McpSpec, ...]) -> ServerTools | None:
        """The backend's MCP servers, connected once and kept while the session names them."""
        # Checked when the session started or was updated; checked again before connecting.
        specs = tuple(spec for spec in specs if self._session.tools.refused((spec,)) is None)
        if not specs and self._servers is None:
            return None
        if self._servers is None:
            self._servers = self._session.tools.another("backend")
        self._servers.use(specs)
        return self._servers if specs else None

    def _call_part(
        self,
        calls: dict[int, PendingCall],
        delta: ToolCallDelta,
        stream: ResponseStream,
        out: Callable[[dict[str, object]], None],
        output: _Output,
        servers: ServerTools | None,
    ) -> None:
        call = calls.get(delta.index)
        if call is None:
            call = calls[delta.index] = PendingCall(delta.call_id or new_id("call"))
        if delta.name:
            call.name = delta.name
            spec = servers.server_of(delta.name, self._functions) if servers else None
            if spec is None or not spec.needs_approval(delta.name):
                call.index = output.next()
            if spec is not None and spec.needs_approval(delta.name):
                # Told as an approval request once its arguments are known.
                call.server, call.item_id, call.asks = spec.label, new_id("mcpr"), True
            elif spec is not None:
                call.server, call.item_id = spec.label, new_id("mcp")
                out(stream.mcp_call_added(call.item_id, call.index, call.server, call.name))
            else:
                call.item_id = f"fc_{call.call_id}"
                out(stream.call_added(call.item_id, call.index, call.call_id, call.name))
        if delta.arguments:
            call.arguments.append(delta.arguments)

    def _calls_done(
        self,
        calls: dict[int, PendingCall],
        stream: ResponseStream,
        out: Callable[[dict[str, object]], None],
    ) -> None:
        requests = []
        for _, call in sorted(calls.items()):
            arguments = "".join(call.arguments)
            for nested in stream.call_done(call.item_id, call.index, call.call_id, call.name,
                                           arguments):  # fmt: skip
                out(nested)
            requests.append({"id": call.call_id, "type": "function",
                             "function": {"name": call.name, "arguments": arguments}})  # fmt: skip
        self._backend_add({"role": "assistant", "content": None, "tool_calls": requests})  # type: ignore[typeddict-item]


@dataclass(slots=True)
class _Output:
    """A backend response's output so far: its items' count, its words, whether the client
    has calls to run."""

    items: int = 0
    answer: str = ""
    client_calls: bool = False
    asked: bool = False  # a call waits for the client's approval

    def next(self) -> int:
        self.items += 1
        return self.items - 1


def _text_of(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p.get("text", "") for p in content if isinstance(p, dict)]
        return " ".join(str(p) for p in parts)
    raise BadEvent("a message's content is text, or a list of text parts", "invalid_value",
                   "item.content")  # fmt: skip
