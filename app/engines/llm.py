"""Streaming chat LLMs: any OpenAI-compatible server (vLLM) here, or llama.cpp
in-process (app/engines/llama.py).

Both yield text deltas and, when tools are offered, tool-call deltas. Closing
the iterator early (a cancelled turn) ends the generation: the HTTP stream is
closed, so vLLM aborts the request; the embedded worker stops at its next token
and frees its gate.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from collections.abc import AsyncGenerator
from typing import Any, Protocol

import httpx

from app.config import LlmSettings
from app.engines.bare_tool_calls import BareToolCalls
from app.errors import EngineError
from app.vocab.chat import ChatMessage, Delta, TokenCount, Tool, ToolCallDelta, ToolChoice

log = logging.getLogger(__name__)


class ChatLLM(Protocol):
    model_name: str
    reads_ahead: bool  # read_ahead does something: the LLM runs in this process

    def stream(
        self,
        messages: list[ChatMessage],
        *,
        max_tokens: int | None = None,
        tools: list[Tool] | None = None,
        tool_choice: ToolChoice | None = None,
        for_reply: str | None = None,
        tokens: TokenCount | None = None,
    ) -> AsyncGenerator[Delta, None]:
        """The reply, delta by delta; `max_tokens` None: llm.max_tokens. `for_reply`: the
        reply's id, logged here with the id the request carries to the server (X-Request-Id,
        which vLLM logs), so the two logs can be joined. `tokens`: where to add what the
        request used."""
        ...

    async def read_ahead(self, messages: list[ChatMessage], *, unfinished: bool = False) -> None:
        """Read the start of a prompt to come while the engine is idle, so that its turn
        reads only what is new (a no-op where the LLM server caches prefixes itself).
        `unfinished`: the last message is the user's words so far; more will follow."""
        ...

    async def aclose(self) -> None: ...


class OpenAICompatLLM:
    """POST /chat/completions with stream=true; one pooled client for every slot."""

    reads_ahead = False

    def __init__(self, settings: LlmSettings) -> None:
        self._settings = settings
        self.model_name = settings.model
        headers = {"Authorization": f"Bearer {settings.api_key}"} if settings.api_key else {}
        self._client = httpx.AsyncClient(
            base_url=settings.base_url.rstrip("/") + "/",
            headers=headers,
            timeout=httpx.Timeout(settings.timeout_s, connect=min(5.0, settings.timeout_s)),
            limits=httpx.Limits(max_connections=256, max_keepalive_connections=64),
        )

    async def start(self) -> None:
        """Check the server answers, and pick its model when none is configured."""
        started = time.perf_counter()
        try:
            response = await self._client.get("models")
            response.raise_for_status()
            served = [item["id"] for item in response.json().get("data", [])]
        except httpx.TransportError as exc:
            raise EngineError(
                f"the LLM server at {self._settings.base_url} cannot be reached ({exc!r}): is "
                "it running, and is VOICE_LLM__BASE_URL (--llm-base-url) its address?",
                retryable=True,
                code="llm_unavailable",
            ) from exc
        except (httpx.HTTPError, ValueError, KeyError) as exc:
            if not self.model_name:
                raise EngineError(
                    f"LLM server {self._settings.base_url} did not list its models ({exc}); "
                    "set VOICE_LLM__MODEL",
                    retryable=True,
                ) from exc
            log.warning("LLM server %s: model list unavailable: %s", self._settings.base_url, exc)
            served = []
        if not self.model_name:
            if not served:
                raise EngineError(f"LLM server {self._settings.base_url} serves no models")
            self.model_name = served[0]
        log.info(
            "llm ready: %s at %s in %.2fs",
            self.model_name,
            self._settings.base_url,
            time.perf_counter() - started,
        )

    async def stream(
        self,
        messages: list[ChatMessage],
        *,
        max_tokens: int | None = None,
        tools: list[Tool] | None = None,
        tool_choice: ToolChoice | None = None,
        for_reply: str | None = None,
        tokens: TokenCount | None = None,
    ) -> AsyncGenerator[Delta, None]:
        if not self.model_name:
            await self.start()
        body: dict[str, Any] = {
            "model": self.model_name,
            "messages": messages,
            "stream": True,
            # The last chunk then says what the request used (vLLM, llama.cpp's server).
            "stream_options": {"include_usage": True},
            "max_tokens": max_tokens or self._settings.max_tokens,
            "temperature": self._settings.temperature,
        }
        if self._settings.repetition_penalty != 1.0:
            body["repetition_penalty"] = self._settings.repetition_penalty  # vLLM's extra
        if tools:
            body["tools"] = tools
            body["tool_choice"] = tool_choice or "auto"
        calls = BareToolCalls(tools if tool_choice != "none" else None)
        try:
            # vLLM names the request by this header in its log; llama.cpp's server wants a UUID4.
            request_id = str(uuid.uuid4())
            log.info("LLM request %s answers %s", request_id, for_reply or "a direct call")
            async with asyncio.timeout(self._settings.first_token_timeout_s) as deadline:
                async with self._client.stream(
                    "POST", "chat/completions", json=body, headers={"X-Request-Id": request_id}
                ) as response:
                    if response.status_code != 200:
                        detail = (await response.aread()).decode(errors="replace")[:300]
                        status = response.status_code
                        raise EngineError(
                            f"LLM server answered {status}: {detail}",
                            retryable=status in (408, 429) or status >= 500,
                            code="llm_unavailable",
                        )
                    finished = False
                    async for chunk in _chunks(response, deadline, self._settings):
                        if chunk is _DONE:
                            finished = True
                            break
                        assert isinstance(chunk, dict)
                        _count(chunk, tokens)
                        finished = finished or _finish_reason(chunk) is not None
                        for delta in choice_deltas(chunk):
                            # The first token is in: from now on, only stalls count.
                            deadline.reschedule(None)
                            for passed in calls.push(delta):
                                yield passed
                    if not finished:
                        raise EngineError(
                            "the LLM server's stream ended before the reply did (no "
                            "finish_reason, no [DONE])",
                            retryable=True,
                            code="llm_stream_broken",
                        )
                    for passed in calls.finish():
                        yield passed
        except TimeoutError:
            raise EngineError(
                f"the LLM server sent no token within {self._settings.first_token_timeout_s:g} s",
                retryable=True,
                code="llm_timeout",
            ) from None
        except httpx.TimeoutException as exc:
            raise EngineError(
                f"LLM server timed out: {exc!r}", retryable=True, code="llm_timeout"
            ) from exc
        except httpx.TransportError as exc:
            raise EngineError(
                f"LLM server {self._settings.base_url} unreachable: {exc!r}",
                retryable=True,
                code="llm_unavailable",
            ) from exc

    async def read_ahead(self, messages: list[ChatMessage], *, unfinished: bool = False) -> None:
        """vLLM caches prompt prefixes itself, and reading ahead would cost a request."""

    async def aclose(self) -> None:
        await self._client.aclose()


_DONE = object()


async def _chunks(
    response: httpx.Response, deadline: asyncio.Timeout, settings: LlmSettings
) -> AsyncGenerator[object, None]:
    """The stream's chunks (dicts, then _DONE), each within stall_timeout_s of the one
    before once tokens flow; before the first, `deadline` (first_token_timeout_s) rules."""
    lines = response.aiter_lines()
    while True:
        waiting_first = deadline.when() is not None
        try:
            if waiting_first:
                line = await anext(lines)
            else:
                async with asyncio.timeout(settings.stall_timeout_s):
                    line = await anext(lines)
        except StopAsyncIteration:
            return
        except TimeoutError:
            raise EngineError(
                f"the LLM server's stream stalled for {settings.stall_timeout_s:g} s mid-reply",
                retryable=True,
                code="llm_timeout",
            ) from None
        chunk = _sse_chunk(line)
        if chunk is not None and chunk is not _DONE and not isinstance(chunk, dict):
            raise EngineError(
                f"LLM server sent a stream line that is no chunk: {line[:120]!r}",
                retryable=True,
                code="llm_stream_broken",
            )
        if chunk is not None:
            yield chunk


def _finish_reason(chunk: dict[str, Any]) -> str | None:
    choices = chunk.get("choices") or []
    reason = choices[0].get("finish_reason") if choices else None
    return reason if isinstance(reason, str) else None


def _sse_chunk(line: str) -> object:
    if not line.startswith("data:"):
        return None
    data = line[5:].strip()
    if data == "[DONE]":
        return _DONE
    try:
        return json.loads(data)
    except (ValueError, RecursionError) as exc:
        raise EngineError(
            f"LLM server sent a malformed stream line: {data[:120]!r}",
            retryable=True,
            code="llm_stream_broken",
        ) from exc


def _count(chunk: dict[str, Any], tokens: TokenCount | None) -> None:
    usage = chunk.get("usage")
    if tokens is None or not isinstance(usage, dict):
        return
    tokens.prompt += int(usage.get("prompt_tokens") or 0)
    tokens.completion += int(usage.get("completion_tokens") or 0)
    details = usage.get("prompt_tokens_details")  # vLLM's, with --enable-prompt-tokens-details
    if isinstance(details, dict):
        tokens.cached += int(details.get("cached_tokens") or 0)


def choice_deltas(chunk: dict[str, Any]) -> list[Delta]:
    """The text and tool-call deltas of one streamed chat completion chunk."""
    choices = chunk.get("choices") or []
    if not choices:
        return []
    delta = choices[0].get("delta") or {}
    out: list[Delta] = []
    content = delta.get("content")
    if isinstance(content, str) and content:
        out.append(content)
    for call in delta.get("tool_calls") or []:
        function = call.get("function") or {}
        out.append(
            ToolCallDelta(
                index=int(call.get("index", 0)),
                call_id=call.get("id"),
                name=function.get("name"),
                arguments=function.get("arguments") or "",
            )
        )
    return out
