"""The Responses API's streaming events, as a Live session's `response.event` envelopes
carry them from its Responses backend (openai.types.responses shapes). Lifecycle
snapshots leave out input, instructions, tools and output, as Live's do."""

from __future__ import annotations

import time
from typing import Any

from app.ids import new_id

Nested = dict[str, Any]


class ResponseStream:
    """One backend response's events, numbered in order."""

    def __init__(self, model: str) -> None:
        self.id = new_id("resp")
        self.model = model
        self._created_at = int(time.time())
        self._sequence = 0

    def _event(self, type_: str, **fields: Any) -> Nested:
        self._sequence += 1
        return {"type": type_, "sequence_number": self._sequence, **fields}

    def snapshot(self, status: str, **extra: Any) -> Nested:
        return {
            "id": self.id,
            "object": "response",
            "created_at": self._created_at,
            "model": self.model,
            "status": status,
            "output": [],
            "parallel_tool_calls": False,
            "tool_choice": "auto",
            "tools": [],
            **extra,
        }

    def created(self) -> Nested:
        return self._event("response.created", response=self.snapshot("in_progress"))

    def completed(self, tokens_in: int, tokens_out: int) -> Nested:
        usage = {
            "input_tokens": tokens_in,
            "output_tokens": tokens_out,
            "total_tokens": tokens_in + tokens_out,
            "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
            "output_tokens_details": {"reasoning_tokens": 0},
        }
        return self._event("response.completed", response=self.snapshot("completed", usage=usage))

    def failed(self, code: str, message: str) -> Nested:
        error = {"code": "server_error", "message": f"{code}: {message}"}
        return self._event("response.failed", response=self.snapshot("failed", error=error))

    def message_added(self, item_id: str, index: int) -> Nested:
        item = {"id": item_id, "type": "message", "role": "assistant", "status": "in_progress",
                "content": []}  # fmt: skip
        return self._event("response.output_item.added", output_index=index, item=item)

    def text_delta(self, item_id: str, index: int, delta: str) -> Nested:
        return self._event("response.output_text.delta", item_id=item_id, output_index=index,
                           content_index=0, delta=delta, logprobs=[])  # fmt: skip

    def message_done(self, item_id: str, index: int, text: str) -> list[Nested]:
        part = {"type": "output_text", "text": text, "annotations": []}
        item = {"id": item_id, "type": "message", "role": "assistant", "status": "completed",
                "content": [part]}  # fmt: skip
        return [
            self._event("response.output_text.done", item_id=item_id, output_index=index,
                        content_index=0, text=text, logprobs=[]),
            self._event("response.output_item.done", output_index=index, item=item),
        ]  # fmt: skip

    def call_added(self, item_id: str, index: int, call_id: str, name: str) -> Nested:
        item = {"id": item_id, "type": "function_call", "call_id": call_id, "name": name,
                "arguments": "", "status": "in_progress"}  # fmt: skip
        return self._event("response.output_item.added", output_index=index, item=item)

    def call_done(
        self, item_id: str, index: int, call_id: str, name: str, arguments: str
    ) -> list[Nested]:
        item = {"id": item_id, "type": "function_call", "call_id": call_id, "name": name,
                "arguments": arguments, "status": "completed"}  # fmt: skip
        return [
            self._event("response.function_call_arguments.done", item_id=item_id,
                        output_index=index, name=name, arguments=arguments),
            self._event("response.output_item.done", output_index=index, item=item),
        ]  # fmt: skip

    def tools_listed(
        self, item_id: str, index: int, server: str, tools: list[Nested], error: str | None
    ) -> list[Nested]:
        """An MCP server's tools as the backend listed them (`error`: why it could not)."""
        added: Nested = {"id": item_id, "type": "mcp_list_tools", "server_label": server,
                         "tools": []}  # fmt: skip
        done: Nested = {**added, "tools": tools}
        if error is not None:
            done["error"] = error
        ended = "failed" if error is not None else "completed"
        return [
            self._event("response.output_item.added", output_index=index, item=added),
            self._event("response.mcp_list_tools.in_progress", item_id=item_id,
                        output_index=index),
            self._event(f"response.mcp_list_tools.{ended}", item_id=item_id, output_index=index),
            self._event("response.output_item.done", output_index=index, item=done),
        ]  # fmt: skip

    def approval_requested(
        self, item_id: str, index: int, call: tuple[str, str, str]
    ) -> list[Nested]:
        """A call the client must approve first: `call` is (server label, name, arguments)."""
        server, name, arguments = call
        item = {"id": item_id, "type": "mcp_approval_request", "server_label": server,
                "name": name, "arguments": arguments}  # fmt: skip
        return [
            self._event("response.output_item.added", output_index=index, item=item),
            self._event("response.output_item.done", output_index=index, item=item),
        ]

    def mcp_call_added(
        self, item_id: str, index: int, server: str, name: str, approved: str | None = None
    ) -> Nested:
        """`approved`: the approval request's id, for a call the client approved."""
        item = {"id": item_id, "type": "mcp_call", "server_label": server, "name": name,
                "arguments": "", "status": "in_progress"}  # fmt: skip
        if approved is not None:
            item["approval_request_id"] = approved
        return self._event("response.output_item.added", output_index=index, item=item)

    def mcp_call_running(self, item_id: str, index: int, arguments: str) -> list[Nested]:
        return [
            self._event("response.mcp_call_arguments.done", item_id=item_id,
                        output_index=index, arguments=arguments),
            self._event("response.mcp_call.in_progress", item_id=item_id, output_index=index),
        ]  # fmt: skip

    def mcp_call_done(
        self,
        item_id: str,
        index: int,
        call: tuple[str, str, str],
        output: str | None,
        error: dict[str, Any] | None,
        approved: str | None = None,
    ) -> list[Nested]:
        """`call`: (server label, name, arguments); `error` as an mcp_call's in Realtime
        (protocol_error, tool_execution_error, http_error), worded here as Responses'."""
        server, name, arguments = call
        item: Nested = {"id": item_id, "type": "mcp_call", "server_label": server, "name": name,
                        "arguments": arguments, "output": output,
                        "status": "failed" if error else "completed"}  # fmt: skip
        if approved is not None:
            item["approval_request_id"] = approved
        if error is not None:
            item["error"] = _responses_error(error)
        ended = "failed" if error else "completed"
        return [
            self._event(f"response.mcp_call.{ended}", item_id=item_id, output_index=index),
            self._event("response.output_item.done", output_index=index, item=item),
        ]


def _responses_error(error: dict[str, Any]) -> Nested:
    kind = error.get("type")
    if kind == "tool_execution_error":
        return {"type": "mcp_tool_execution_error", "content": error.get("message", "")}
    shown = "http_error" if kind == "http_error" else "mcp_protocol_error"
    return {"type": shown, "code": error.get("code", 0), "message": error.get("message", "")}
