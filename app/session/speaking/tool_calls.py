"""The tools a reply calls, assembled from the LLM's streamed deltas.

Each call becomes an output item of the reply as soon as its name is known; its
arguments follow in pieces. At the end a call whose arguments are not a JSON
object is marked incomplete: the client could not run it.

A call of an MCP server's tool (`server`) is run by this server within the reply; one
that needs the client's approval first is not shown as a call at all, but asked about
once its arguments are whole.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from app.ids import new_id
from app.session import messages as msg
from app.vocab.chat import ToolCallDelta


@dataclass(slots=True)
class _Pending:
    call: msg.FunctionCall
    arguments: list[str] = field(default_factory=list)
    approval: bool = False  # asked about, not run: no call item
    taken: bool = False  # handed over to be run (or asked about) already


class ToolCalls:
    def __init__(self, response_id: str, emit: Callable[[msg.SessionMessage], None]) -> None:
        self._response_id = response_id
        self._emit = emit
        self._calls: dict[tuple[int, int], _Pending] = {}
        self._round = 0  # the LLM's deltas number calls anew in each round

    def next_round(self) -> None:
        self._round += 1

    def __bool__(self) -> bool:
        return bool(self._calls)

    def add(
        self,
        delta: ToolCallDelta,
        output_index: int,
        previous: str | None,
        *,
        server: str = "",
        approval: bool = False,
        approval_request_id: str | None = None,
    ) -> bool:
        """Take a delta; True if it started a new output item (at `output_index`).

        `server`: the MCP server whose tool this is; `approval`: it needs the client's
        approval first. Both are known from the call's first delta (its name)."""
        key = (self._round, delta.index)
        pending = self._calls.get(key)
        started = pending is None and not approval
        if pending is None:
            call = msg.FunctionCall(
                item_id=new_id("item"),
                call_id=delta.call_id or new_id("call"),
                name=delta.name or "",
                arguments="",
                output_index=output_index if started else -1,
                previous_item_id=previous,
                server=server,
                approval_request_id=approval_request_id,
            )
            pending = self._calls[key] = _Pending(call, approval=approval)
            if started:
                self._emit(msg.FunctionCallStarted(self._response_id, call))
        if delta.arguments:
            pending.arguments.append(delta.arguments)
            if pending.approval:
                return started
            call = pending.call
            self._emit(
                msg.FunctionCallArguments(
                    self._response_id,
                    call.item_id,
                    call.call_id,
                    call.output_index,
                    delta.arguments,
                    call.server,
                )
            )
        return started

    @property
    def last_item_id(self) -> str | None:
        calls = [pending.call for pending in self._calls.values() if not pending.approval]
        return max(calls, key=lambda c: c.output_index).item_id if calls else None

    def server_calls(self) -> tuple[list[msg.FunctionCall], list[msg.FunctionCall]]:
        """The servers' calls of the round just streamed, whole, not handed over before:
        (to run, to ask approval for). Each is handed over once."""
        run: list[msg.FunctionCall] = []
        ask: list[msg.FunctionCall] = []
        for pending in self._calls.values():
            if pending.taken or not pending.call.server:
                continue
            pending.taken = True
            call = replace(pending.call, arguments="".join(pending.arguments))
            (ask if pending.approval else run).append(call)
        return run, ask

    @property
    def for_client(self) -> bool:
        """Some call is the client's to run: the reply ends with it."""
        return any(not pending.call.server for pending in self._calls.values())

    def ran(self, call: msg.FunctionCall) -> None:
        """A server's call ended (its output or error set)."""
        for pending in self._calls.values():
            if pending.call.item_id == call.item_id:
                pending.call = call

    def finished(self, *, complete: bool) -> tuple[msg.FunctionCall, ...]:
        """Every call as it ended; `complete` False: the reply was cut short."""
        out = []
        for pending in self._calls.values():
            if pending.approval:
                continue
            arguments = "".join(pending.arguments)
            ended = pending.call.output is not None or pending.call.error is not None
            whole = (complete or ended) and _is_object(arguments)
            out.append(replace(pending.call, arguments=arguments, complete=whole))
        return tuple(sorted(out, key=lambda call: call.output_index))


def _is_object(arguments: str) -> bool:
    try:
        return isinstance(json.loads(arguments), dict)
    except (ValueError, RecursionError):
        return False
