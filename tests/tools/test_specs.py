"""MCP tools as sessions and the operator name them, and which URLs a client may use."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from app.config import Settings
from app.realtime.server_events import reply_ended
from app.session import messages as msg
from app.tools.specs import TOOL_LIST, UrlPolicy, tool_set


@pytest.mark.parametrize(
    ("url", "allowed"),
    [
        ("http://127.0.0.1:8123/mcp", True),
        ("https://tools.example.com/crm/mcp", True),
        ("http://127.0.0.1:8123@evil.example/mcp", False),  # a user part, then another host
        ("http://127.0.0.1:8123/other", False),
        ("https://tools.example.com.evil.example/mcp", False),
        ("http://tools.example.com/crm/mcp", False),  # not https
        ("not a url", False),
    ],
)
def test_only_the_allowed_urls(url: str, allowed: bool) -> None:
    policy = UrlPolicy(["http://127.0.0.1:*/mcp", "https://tools.example.com/*"])
    assert policy.allows(url) is allowed


def test_a_pattern_that_is_no_url_stops_the_server() -> None:
    with pytest.raises(ValidationError, match="not an MCP URL pattern"):
        Settings(tools={"mcp_allowed_urls": "*"})


def test_no_url_is_allowed_by_default() -> None:
    assert not UrlPolicy(Settings().tools.mcp_allowed_urls).allows("http://127.0.0.1:1/mcp")


def test_approval_and_filters_as_openai_defines_them() -> None:
    tools = TOOL_LIST.validate_python([
        {"type": "mcp", "server_label": "a", "server_url": "https://x/mcp"},
        {"type": "mcp", "server_label": "b", "server_url": "https://x/mcp",
         "require_approval": "never", "allowed_tools": ["one"]},
        {"type": "mcp", "server_label": "c", "server_url": "https://x/mcp",
         "require_approval": {"never": {"tool_names": ["safe"]}},
         "headers": {"X-Key": "secret"}, "authorization": "tok"},
    ])  # fmt: skip
    a, b, c = tool_set(tools).servers
    assert a.needs_approval("anything"), "OpenAI asks unless told not to"
    assert not b.needs_approval("one") and b.offers("one", False) and not b.offers("two", False)
    assert not c.needs_approval("safe") and c.needs_approval("other")
    assert c.headers == {"X-Key": "secret", "Authorization": "Bearer tok"}
    assert "secret" not in repr(c) and "secret" not in str(c.to_realtime())


def test_a_command_is_the_operators_alone() -> None:
    command = [{"type": "mcp", "server_label": "t", "command": ["python", "-m", "x"]}]
    with pytest.raises(ValueError, match="only the operator"):
        tool_set(TOOL_LIST.validate_python(command))
    assert tool_set(TOOL_LIST.validate_python(command), operator=True).servers[0].command
    with pytest.raises(ValidationError, match="needs server_url"):
        Settings(tools={"default": '[{"type": "mcp", "server_label": "t"}]'})


def test_the_operators_tools_come_from_a_file(tmp_path: object) -> None:
    from pathlib import Path

    path = Path(str(tmp_path)) / "tools.json"
    path.write_text('[{"type": "mcp", "server_label": "t", "command": ["mcp-server-time"]}]')
    assert Settings(tools={"default": f"@{path}"}).tools.default[0]["server_label"] == "t"


def test_response_output_keeps_the_items_order() -> None:
    call = msg.FunctionCall("item_m", "call_1", "order_status", "{}", 0, server="orders",
                            output="shipped")  # fmt: skip
    words = msg.MessageStarted("resp_1", "item_w", "item_m", 1)
    done = reply_ended(msg.ReplyEnded("resp_1", "completed", "It shipped.", words, (call,)))
    output = done[-1]["response"]["output"]
    assert [item["type"] for item in output] == ["mcp_call", "message"]
    assert output[0]["output"] == "shipped"


@pytest.mark.parametrize(
    ("pattern", "url", "allowed"),
    [
        ("https://*.example.com/*", "https://crm.example.com/mcp", True),
        ("https://*.example.com/*", "https://evil.com/.example.com/", False),
        ("https://*.example.com/*", "https://evil.com?.example.com/", False),
        ("https://tools.example.com*", "https://tools.example.com.evil.net/mcp", False),
        ("https://tools.example.com/mcp", "https://tools.example.com:8443/mcp", False),
        ("http://127.0.0.1:*/mcp", "http://127.0.0.1:8000/other", False),
    ],
)
def test_a_star_never_reaches_another_host(pattern: str, url: str, allowed: bool) -> None:
    assert UrlPolicy([pattern]).allows(url) is allowed


def test_a_live_backends_mcp_headers_are_never_shown() -> None:
    from app.live.session_config import Delegation, describe_delegation

    tool = {"type": "mcp", "server_label": "x", "server_url": "https://x/mcp",
            "headers": {"X-Key": "secret"}, "authorization": "token"}  # fmt: skip
    delegation = Delegation.model_validate({"type": "responses", "responses": {"tools": [tool]}})
    shown = describe_delegation(delegation)
    assert shown is not None and shown["responses"]["tools"] == [
        {"type": "mcp", "server_label": "x", "server_url": "https://x/mcp"}
    ]
