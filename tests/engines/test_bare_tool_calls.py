"""Tool calls written as text (Qwen2.5-Coder's bare JSON through vLLM's hermes parser) become
calls; everything else passes as it came. tests/vllm sees the real model do it."""

from __future__ import annotations

import json

import pytest

from app.engines.bare_tool_calls import BareToolCalls
from app.vocab.chat import Delta, Tool, ToolCallDelta

LIGHTS: Tool = {
    "type": "function",
    "function": {"name": "set_lights", "parameters": {"type": "object"}},
}


def streamed(pieces: list[Delta], tools: list[Tool] | None = None) -> tuple[list[Delta], int]:
    """Everything passed on, and how many pieces went in before the first came out."""
    calls = BareToolCalls([LIGHTS] if tools is None else tools)
    out: list[Delta] = []
    first_out = len(pieces)
    for n, piece in enumerate(pieces):
        out += calls.push(piece)
        if out and first_out == len(pieces):
            first_out = n
    return out + calls.finish(), first_out


def tokens(text: str, size: int = 3) -> list[Delta]:
    return [text[i : i + size] for i in range(0, len(text), size)]


@pytest.mark.parametrize(
    "written",
    [
        '{"name": "set_lights", "arguments": {"room": "kitchen", "on": true}}',
        '  ```json\n{"name": "set_lights", "arguments": {"room": "kitchen", "on": true}}\n```',
        '<tool_call>\n{"name": "set_lights", "arguments": "{\\"room\\": \\"kitchen\\", '
        '\\"on\\": true}"}\n</tool_call>',
        '{{"name": "set_lights", "arguments": {"room": "kitchen", "on": true}}}',
    ],
)
def test_a_call_written_as_text_becomes_the_call(written: str) -> None:
    out, _ = streamed(tokens(written))
    assert len(out) == 1 and isinstance(out[0], ToolCallDelta), out
    call = out[0]
    assert call.name == "set_lights" and call.index == 0 and call.call_id
    assert json.loads(call.arguments) == {"room": "kitchen", "on": True}


def test_two_calls_in_a_row_are_two_calls() -> None:
    written = (
        '{"name": "set_lights", "arguments": {"room": "kitchen"}}\n'
        '{"name": "set_lights", "parameters": {"room": "hall"}}'
    )
    out, _ = streamed(tokens(written))
    assert [(d.index, json.loads(d.arguments)) for d in out if isinstance(d, ToolCallDelta)] == [
        (0, {"room": "kitchen"}),
        (1, {"room": "hall"}),
    ]


def test_words_pass_at_once() -> None:
    out, first_out = streamed(["The", " capital", " of France is Paris."])
    assert out == ["The", " capital", " of France is Paris."] and first_out == 0
    out, first_out = streamed(["<", "b>bold</b>"])  # opened like the tag, then not
    assert "".join(str(d) for d in out) == "<b>bold</b>" and first_out == 1


@pytest.mark.parametrize(
    "written",
    [
        '{"name": "order_pizza", "arguments": {}}',  # a tool not offered
        '{"name": "set_lights", "arguments": [1]}',
        '{"name": "set_lights", "arguments": {"room": "kitchen"}} and then some words',
        "{ not JSON at all",
        "{{ not JSON at all }}",
    ],
)
def test_what_is_no_call_of_an_offered_tool_stays_text(written: str) -> None:
    out, _ = streamed(tokens(written))
    assert out == [written]


def test_without_tools_nothing_is_held() -> None:
    written = '{"name": "set_lights", "arguments": {}}'
    out, first_out = streamed(tokens(written), tools=[])
    assert "".join(str(d) for d in out) == written and first_out == 0


def test_a_call_the_server_parsed_passes_through() -> None:
    parsed = ToolCallDelta(0, call_id="call_1", name="set_lights", arguments="{}")
    out, first_out = streamed([parsed])
    assert out == [parsed] and first_out == 0
