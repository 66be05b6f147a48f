"""Tool calls a model writes as plain text, taken as the calls they are.

Qwen2.5-Coder is told, by its own chat template, to wrap a call in <tool_call> tags, but it
writes the bare JSON: `{"name": "set_lights", "arguments": {"room": "kitchen"}}`. vLLM's
hermes parser looks for the tags and passes the rest on as words, which the voice would
read out. So where tools are offered, a reply that opens like JSON (or a fence, or the
tag) is held until it ends, then becomes tool calls if it is nothing but calls of offered
tools, and is let through as text otherwise.
"""

from __future__ import annotations

import json
import re
import uuid
from typing import Any

from app.vocab.chat import Delta, Tool, ToolCallDelta

_OPENINGS = ("{", "[", "`", "<tool_call>")
_WRAPPING = re.compile(r"```(?:json)?|</?tool_call>")


class BareToolCalls:
    """Fed a reply's deltas as they stream, gives back what to pass on."""

    def __init__(self, tools: list[Tool] | None) -> None:
        self._names = {tool["function"]["name"] for tool in tools or []}
        self._held = ""
        # None: the reply has not shown yet whether it may be a call.
        self._holding: bool | None = None if self._names else False

    def push(self, delta: Delta) -> list[Delta]:
        if self._holding is False or not isinstance(delta, str):
            return [delta]
        self._held += delta
        text = self._held.lstrip()
        if self._holding is None:
            if text.startswith(_OPENINGS):
                self._holding = True
            elif not any(opening.startswith(text) for opening in _OPENINGS):
                self._holding = False  # ("<" or "" may still open one)
        if self._holding is not False:
            return []
        held, self._held = self._held, ""
        return [held]

    def finish(self) -> list[Delta]:
        """The reply has ended: what was held, as calls or as the text it was."""
        text, self._held = self._held, ""
        if not text:
            return []
        calls = tool_calls(text, self._names)
        return list(calls) if calls else [text]


def tool_calls(text: str, names: set[str]) -> list[ToolCallDelta]:
    """`text` as calls of the tools `names`, if it is nothing else; [] if it is not."""
    rest = _WRAPPING.sub(" ", text).strip()
    if rest.startswith("{{") and rest.endswith("}}"):
        # The 1.5B on vLLM wrote its call in a template's escaped braces: {{"name": ...}}.
        rest = rest[1:-1]
    decoder = json.JSONDecoder()
    found: list[Any] = []
    try:
        while rest:
            value, end = decoder.raw_decode(rest)
            found.extend(value if isinstance(value, list) else [value])
            rest = rest[end:].lstrip(" \n,;")
    except (ValueError, RecursionError):
        return []
    calls = []
    for index, call in enumerate(found):
        if not isinstance(call, dict) or call.get("name") not in names:
            return []
        arguments = call.get("arguments", call.get("parameters", {}))
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments)
            except ValueError:
                return []
        if not isinstance(arguments, dict):
            return []
        calls.append(
            ToolCallDelta(
                index,
                call_id=f"call_{uuid.uuid4().hex[:20]}",
                name=call["name"],
                arguments=json.dumps(arguments),
            )
        )
    return calls
