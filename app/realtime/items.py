"""Conversation items in the OpenAI Realtime (GA) shape: what the events carry."""

from __future__ import annotations

from typing import Any

from app.session import messages as msg
from app.session.history import Message

Item = dict[str, Any]


def function_call_item(call: msg.FunctionCall, status: str) -> dict[str, Any]:
    return {
        "id": call.item_id,
        "object": "realtime.item",
        "type": "function_call",
        "status": status,
        "call_id": call.call_id,
        "name": call.name,
        "arguments": call.arguments,
    }


def mcp_call_item(call: msg.FunctionCall) -> dict[str, Any]:
    """A call this server ran on an MCP server: output or error once it ended."""
    item: dict[str, Any] = {
        "id": call.item_id,
        "type": "mcp_call",
        "server_label": call.server,
        "name": call.name,
        "arguments": call.arguments,
        "output": call.output,
        "error": call.error,
    }
    if call.approval_request_id is not None:
        item["approval_request_id"] = call.approval_request_id
    return item


def call_item(call: msg.FunctionCall, status: str) -> dict[str, Any]:
    """A function call for the client to run, or an MCP call this server runs."""
    return mcp_call_item(call) if call.server else function_call_item(call, status)


def mcp_list_tools_item(
    item_id: str, server: str, tools: tuple[dict[str, object], ...] = ()
) -> dict[str, Any]:
    return {"id": item_id, "type": "mcp_list_tools", "server_label": server, "tools": list(tools)}


def approval_request_item(request: msg.ApprovalRequested) -> dict[str, Any]:
    return {
        "id": request.item_id,
        "type": "mcp_approval_request",
        "server_label": request.server,
        "name": request.name,
        "arguments": request.arguments,
    }


def approval_response_item(
    item_id: str, request_id: str, approve: bool, reason: str | None
) -> dict[str, Any]:
    item: dict[str, Any] = {
        "id": item_id,
        "type": "mcp_approval_response",
        "approval_request_id": request_id,
        "approve": approve,
    }
    if reason:
        item["reason"] = reason
    return item


def function_output_item(item_id: str, call_id: str, output: str) -> dict[str, Any]:
    return {
        "id": item_id,
        "object": "realtime.item",
        "type": "function_call_output",
        "status": "completed",
        "call_id": call_id,
        "output": output,
    }


def assistant_item(
    item_id: str, text: str, status: str, modality: msg.Modality = "audio"
) -> dict[str, Any]:
    content = (
        {"type": "output_text", "text": text}
        if modality == "text"
        else {"type": "output_audio", "transcript": text}
    )
    return {
        "id": item_id,
        "object": "realtime.item",
        "type": "message",
        "role": "assistant",
        "status": status,
        "content": [content],
    }


def user_item(
    item_id: str, *, transcript: str | None = None, text: str | None = None
) -> dict[str, Any]:
    """A user message: spoken (input_audio, transcript once known) or typed (input_text)."""
    content = (
        {"type": "input_text", "text": text}
        if text is not None
        else {"type": "input_audio", "transcript": transcript}
    )
    return {
        "id": item_id,
        "object": "realtime.item",
        "type": "message",
        "role": "user",
        "status": "completed",
        "content": [content],
    }


def text_item(item_id: str, role: str, text: str) -> dict[str, Any]:
    if role == "user":
        return user_item(item_id, text=text)
    kind = "output_text" if role == "assistant" else "input_text"
    return {
        "id": item_id,
        "object": "realtime.item",
        "type": "message",
        "role": role,
        "status": "completed",
        "content": [{"type": kind, "text": text}],
    }


def stored_item(message: Message, audio: str | None) -> Item:
    """An item as stored; `audio`: the user's speech, base64 pcm16 at 24 kHz, if kept."""
    if message.call is not None:
        return call_item(message.call, "completed")
    if message.role == "tool":
        return function_output_item(message.item_id, message.call_id, message.content)
    if message.role == "assistant" and message.spoken:
        item = assistant_item(message.item_id, message.content, _status(message))
    elif message.role == "assistant":
        item = assistant_item(message.item_id, message.content, _status(message), "text")
    elif message.spoken:
        item = user_item(message.item_id, transcript=message.content)
        part = item["content"][0]
        if audio is not None:
            part["audio"] = audio
        elif message.audio_dropped:
            part["audio_dropped"] = True  # ours: the speech is no longer kept
    else:
        item = text_item(message.item_id, message.role, message.content)
    return item


def _status(message: Message) -> str:
    return "incomplete" if message.interrupted else "completed"
