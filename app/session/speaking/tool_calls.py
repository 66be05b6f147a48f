"""The tools a reply calls, assembled from the LLM's streamed deltas.

Each call becomes an output item of the reply as soon as its name is known; its
arguments follow in pieces. At the end a call whose arguments are not a JSON
object is marked incomplete: the client could not run it.
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


class ToolCalls:
    def __init__(self, response_id: str, emit: Callable[[msg.SessionMessage], None]) -> None:
        self._response_id = response_id
        self._emit = emit
        self._calls: dict[int, _Pending] = {}

    def __bool__(self) -> bool:
        return bool(self._calls)

    def add(self, delta: ToolCallDelta, output_index: int, previous: str | None) -> bool:
        """Take a delta; True if it started a new output item (at `output_index`)."""
        pending = self._calls.get(delta.index)
        started = pending is None
        if pending is None:
            call = msg.FunctionCall(
                item_id=new_id("item"),
                call_id=delta.call_id or new_id("call"),
                name=delta.name or "",
                arguments="",
                output_index=output_index,
                previous_item_id=previous,
            )
            pending = self._calls[delta.index] = _Pending(call)
            self._emit(msg.FunctionCallStarted(self._response_id, call))
        if delta.arguments:
            pending.arguments.append(delta.arguments)
            call = pending.call
            self._emit(
                msg.FunctionCallArguments(
                    self._response_id,
                    call.item_id,
                    call.call_id,
                    call.output_index,
                    delta.arguments,
                )
            )
        return started

    @property
    def last_item_id(self) -> str | None:
        calls = [pending.call for pending in self._calls.values()]
        return max(calls, key=lambda c: c.output_index).item_id if calls else None

    def finished(self, *, complete: bool) -> tuple[msg.FunctionCall, ...]:
        """Every call as it ended; `complete` False: the reply was cut short."""
        out = []
        for pending in self._calls.values():
            arguments = "".join(pending.arguments)
            whole = complete and _is_object(arguments)
            out.append(replace(pending.call, arguments=arguments, complete=whole))
        return tuple(sorted(out, key=lambda call: call.output_index))


def _is_object(arguments: str) -> bool:
    try:
        return isinstance(json.loads(arguments), dict)
    except (ValueError, RecursionError):
        return False
