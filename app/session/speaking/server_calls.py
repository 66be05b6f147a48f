"""A reply's calls of the session's MCP servers: their tools offered beside the client's
functions, each call routed as it streams, run between the LLM's rounds, and a filler
said if the reply's words are slow to follow."""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable
from dataclasses import replace

from app.agent.responders import SpeechRequest
from app.ids import new_id
from app.session import messages as msg
from app.session.jobs import ApprovedCall
from app.session.options import OptionChanges, SessionOptions
from app.session.server_tools import Pending, ServerTools
from app.session.speaking.filler import Filler
from app.session.speaking.reply import Reply
from app.tools.mcp_link import TIMED_OUT, ToolFailure
from app.vocab.chat import Tool, ToolCallDelta

log = logging.getLogger(__name__)

# Said when a tool is slow to answer, so that a caller is not left in silence.
FILLER = "Let me check."


def unreachable(server: str, failure: ToolFailure) -> str:
    """What the user hears when a tool failed: which system, in words."""
    what = f"the {server.replace('_', ' ').replace('-', ' ')} system"
    if failure.code == TIMED_OUT:
        return f"Sorry, {what} did not answer in time."
    if failure.kind == "tool_execution_error":
        return f"Sorry, {what} could not do that."
    return f"Sorry, I couldn't reach {what}."


Say = Callable[[Reply, SpeechRequest, str], Awaitable[None]]


class ServerCalls:
    def __init__(
        self,
        session_id: str,
        tools: ServerTools | None,
        say: Say,
        own: OptionChanges | None = None,
    ) -> None:
        """`tools`: the session's MCP servers, or a reply's own (`own`: its response's
        tools, where it named some); `say`: a line of the reply, as it is."""
        self._session_id = session_id
        self._tools = tools
        self._say = say
        self._own = own
        self._fillers: dict[str, Filler] = {}  # by reply: said if a tool keeps it waiting
        self._functions: frozenset[str] = frozenset()  # the client's, in the reply's tools

    @property
    def max_rounds(self) -> int:
        return self._tools.settings.max_rounds if self._tools is not None else 0

    async def offered(self, options: SessionOptions) -> list[Tool] | None:
        """The client's functions, and the session's servers' tools once listed."""
        tools = list(options.tools)
        self._functions = frozenset(t["function"]["name"] for t in tools)
        if self._tools is not None and options.servers:
            await self._tools.ready()
            tools += self._tools.chat_tools({t["function"]["name"] for t in tools})
        return tools or None

    def call(self, reply: Reply, delta: ToolCallDelta, request: SpeechRequest) -> None:
        """More of a call the LLM makes: the client's, or a server's (which starts the
        filler's wait)."""
        tools, name = self._tools, delta.name
        spec = tools.server_of(name, self._functions) if tools is not None and name else None
        if spec is None:
            reply.call(delta)
            return
        approval = spec.needs_approval(delta.name or "")
        reply.call(delta, server=spec.label, approval=approval)
        assert self._tools is not None
        after_s = self._tools.settings.filler_after_ms / 1000
        waits = reply.modality == "audio" and not approval and after_s > 0
        if waits and reply.response_id not in self._fillers:
            say = functools.partial(self._say, reply, request, FILLER)
            self._fillers[reply.response_id] = Filler(say, after_s)

    async def settle_filler(self, reply: Reply) -> None:
        filler = self._fillers.pop(reply.response_id, None)
        if filler is not None:
            await filler.settle()

    async def run(self, reply: Reply, request: SpeechRequest) -> bool:
        """Run the servers' calls the LLM just made; True if it should go on with their
        results. A call that needs approval is asked about, and the reply ends there."""
        run, ask = reply.server_calls()
        if self._tools is None or not (run or ask):
            return False
        for call in ask:
            request_id = reply.ask(call)
            pending = Pending(call.server, call.name, call.arguments, self._own)
            self._tools.ask_approval(request_id, pending)
        for n, call in enumerate(run):
            if not await self._run_call(reply, request, call):
                for left in run[n + 1 :]:  # not run: ended, not left hanging
                    error = {"type": "protocol_error", "code": -32000,
                             "message": "not run: a call before it failed"}  # fmt: skip
                    reply.running(left)
                    reply.ran(replace(left, error=error))
                return False
        return bool(run) and not ask and not reply.calls_client

    async def run_approved(
        self, reply: Reply, request: SpeechRequest, approved: ApprovedCall
    ) -> bool:
        """The call the client approved, run as the reply's first round."""
        start = ToolCallDelta(0, call_id=new_id("call"), name=approved.name)
        reply.call(start, server=approved.server, approved=approved.request_id)
        reply.call(ToolCallDelta(0, arguments=approved.arguments), server=approved.server)
        if not await self.run(reply, request):
            return False
        reply.next_round()
        return True

    async def _run_call(self, reply: Reply, request: SpeechRequest, call: msg.FunctionCall) -> bool:
        """One call; on failure the user is told, and False returned (the reply ends)."""
        assert self._tools is not None
        reply.running(call)
        try:
            # A barge-in cancels this task, and so the call.
            output = await self._tools.call(call.server, call.name, call.arguments)
        except ToolFailure as exc:
            log.warning("mcp call %s.%s failed: %s", call.server, call.name, exc,
                        extra={"session_id": self._session_id})  # fmt: skip
            reply.ran(replace(call, error=exc.as_error()))
            await self.settle_filler(reply)
            await self._say(reply, request, unreachable(call.server, exc))
            return False
        reply.ran(replace(call, output=output))
        return True

    def drop_filler(self, reply: Reply) -> None:
        """The reply is over: a filler still waiting is not said."""
        if (filler := self._fillers.pop(reply.response_id, None)) is not None:
            filler.cancel()
