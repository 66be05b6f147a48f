"""The LLM clients against real servers: llama.cpp's OpenAI-compatible server and in-process."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.config import LlmSettings
from app.engines.gate import Gate
from app.engines.llama import LlamaCppLLM
from app.engines.llm import OpenAICompatLLM
from app.errors import EngineError
from app.vocab.chat import ChatMessage, Delta, TokenCount, Tool, ToolCallDelta, ToolChoice
from app.vocab.persona import filled
from tests.conftest import LlamaServer
from tests.support.server import free_port

QUESTION: list[ChatMessage] = [
    {"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "content": "What is the capital of France?"},
]


async def collect(llm: OpenAICompatLLM | LlamaCppLLM, messages: list[ChatMessage]) -> str:
    return "".join([delta async for delta in llm.stream(messages)])


async def test_streams_a_reply_and_finds_the_served_model(openai_server: str) -> None:
    llm = OpenAICompatLLM(LlmSettings(base_url=openai_server, max_tokens=24))
    try:
        await llm.start()
        assert llm.model_name.endswith(".gguf")
        deltas = [delta async for delta in llm.stream(QUESTION)]
    finally:
        await llm.aclose()
    assert len(deltas) > 1, "the reply arrives as a stream of deltas"
    # SmolLM2-135M's answers are often wrong; the plumbing is what is under test.
    assert len("".join(deltas).split()) >= 3


async def test_closing_the_stream_early_frees_the_server(openai_server: str) -> None:
    llm = OpenAICompatLLM(LlmSettings(base_url=openai_server, model="m", max_tokens=400))
    try:
        stream = llm.stream([{"role": "user", "content": "Count from one to two hundred."}])
        async for _ in stream:
            break
        await stream.aclose()
        # llama.cpp's server serves one request at a time: this only completes
        # promptly because the abandoned generation really stopped.
        started = time.monotonic()
        text = await collect(llm, QUESTION)
        assert text and time.monotonic() - started < 30
    finally:
        await llm.aclose()


async def test_a_server_that_is_down_is_a_retryable_engine_error() -> None:
    llm = OpenAICompatLLM(LlmSettings(base_url=f"http://127.0.0.1:{free_port()}/v1", model="m"))
    try:
        with pytest.raises(EngineError, match="unreachable") as caught:
            await collect(llm, QUESTION)
        assert caught.value.retryable
    finally:
        await llm.aclose()


async def test_an_http_error_is_reported_with_its_status(openai_server: str) -> None:
    llm = OpenAICompatLLM(
        LlmSettings(base_url=openai_server.removesuffix("/v1") + "/nope", model="m")
    )
    try:
        with pytest.raises(EngineError, match="answered 404"):
            await collect(llm, QUESTION)
    finally:
        await llm.aclose()


async def test_embedded_llama_streams_and_survives_a_cancelled_generation(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every decode, the warm-up's too, on the gate's one thread: llama.cpp's OpenMP
    threads decoded 18 tokens/s for a thread other than the first to decode, 27 for it."""
    threads: list[int] = []
    decode = LlamaCppLLM._deltas

    def recorded(self: LlamaCppLLM, *args: Any) -> Iterator[Any]:
        threads.append(threading.get_ident())
        yield from decode(self, *args)

    monkeypatch.setattr(LlamaCppLLM, "_deltas", recorded)
    settings = LlmSettings(max_tokens=48)
    llm = LlamaCppLLM(settings)
    try:
        # Warmed up on the default instructions, so a first call's prompt starts cached.
        cached = llm._llama.detokenize(list(llm._llama._input_ids), special=True).decode()
        told = filled(settings.system_prompt, model=llm.model_name, tools=False)
        assert told in cached.split("<|im_end|>")[0], cached
        stream = llm.stream([{"role": "user", "content": "Tell me a long story."}])
        async for _ in stream:
            break
        await stream.aclose()
        tokens = TokenCount()
        text = "".join([delta async for delta in llm.stream(QUESTION, tokens=tokens)])
        assert len(text.split()) >= 3
        # Counted by the model's own tokenizer: the chat template and both messages...
        assert tokens.prompt > len(" ".join(m["content"] for m in QUESTION).split())
        assert 1 <= tokens.completion <= 48, "...and a token a streamed piece"
    finally:
        await llm.aclose()
    assert len(threads) == 3 and len(set(threads)) == 1, threads
    assert threading.get_ident() not in threads


async def test_the_embedded_model_reads_the_next_prompt_ahead_while_idle() -> None:
    """The reply as heard is not the reply as generated ("Paris." for "The capital of France
    is Paris."): read ahead, the next turn reads only the user's words; not while another
    engine works."""
    llm = LlamaCppLLM(LlmSettings(max_tokens=24))
    heard: list[ChatMessage] = [
        *QUESTION,
        {"role": "assistant", "content": "Paris, on the Seine, is the capital of France."},
    ]
    then: list[ChatMessage] = [*heard, {"role": "user", "content": "And of Italy?"}]
    try:
        await collect(llm, QUESTION)  # the context holds the reply as generated
        unread = TokenCount()
        [_ async for _ in llm.stream(then, max_tokens=1, tokens=unread)]
        await collect(llm, QUESTION)
        busy, release = Gate("busy", 1), threading.Event()
        working = asyncio.create_task(busy.run(release.wait))
        await asyncio.sleep(0.05)
        kept = llm._llama.n_tokens
        await llm.read_ahead(heard)
        assert llm._llama.n_tokens == kept, "nothing read while Whisper or Kokoro works"
        release.set()
        await working
        busy.close()
        await llm.read_ahead(heard)
        read = TokenCount()
        [_ async for _ in llm.stream(then, max_tokens=1, tokens=read)]
        # Cancelled (its session closed), it stops reading: ~1400 tokens would take seconds.
        long: list[ChatMessage] = [*QUESTION, {"role": "assistant", "content": "yes " * 1400}]
        reading = asyncio.create_task(llm.read_ahead(long))
        await asyncio.sleep(0.2)
        reading.cancel()
        for _ in range(600):  # until the gate's thread lets go, with no one waiting there
            if not llm._gate.busy:
                break
            await asyncio.sleep(0.05)
        assert llm._llama.n_tokens < 700, llm._llama.n_tokens
        # The user's words so far, read while they speak: the turn reads only the rest.
        await llm.read_ahead([*heard, {"role": "user", "content": "And of"}], unfinished=True)
        last = llm._llama.input_ids[llm._llama.n_tokens - 1 : llm._llama.n_tokens]
        assert llm._llama.detokenize(last) == b" of", "read to the words' end, no further"
        rest = TokenCount()
        [_ async for _ in llm.stream(then, max_tokens=1, tokens=rest)]
    finally:
        await llm.aclose()
    assert read.prompt == unread.prompt == rest.prompt
    after = len(llm._llama.tokenize(b" Italy?<|im_end|>\n", special=True))
    assert rest.prompt - rest.cached <= after + 3, (rest, after)
    # The user's turn opened ("<|im_start|>user\n") is read ahead too: only their words,
    # and the reply's opening ("<|im_start|>assistant\n"), are left.
    new = len(llm._llama.tokenize(b"And of Italy?<|im_end|>\n", special=True))
    assert read.prompt - read.cached <= new + 3, (read, new)
    assert unread.prompt - unread.cached > new + 10, unread


def test_on_a_cpu_with_amx_llama_keeps_its_weights_unrepacked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """llama.cpp's AMX repacking segfaults on some Sapphire Rapids machines: where the CPU
    has AMX, every model this process loads skips it; elsewhere, nothing changes."""
    import llama_cpp.llama_cpp as c

    from app.engines import llama

    flags = "flags\t\t: fpu vme sse sse2 avx2 avx512f"
    (tmp_path / "plain").write_text(f"{flags}\n")
    (tmp_path / "amx").write_text(f"{flags} amx_bf16 amx_int8 amx_tile\n")
    assert not llama.cpu_has_amx(str(tmp_path / "plain"))
    assert llama.cpu_has_amx(str(tmp_path / "amx"))
    assert not llama.cpu_has_amx(str(tmp_path / "absent"))

    # llama.cpp's own, whether or not this process has avoided AMX already
    defaults = getattr(c.llama_model_default_params, "repacking", c.llama_model_default_params)
    monkeypatch.setattr(c, "llama_model_default_params", defaults)
    monkeypatch.setattr(llama, "cpu_has_amx", lambda: False)
    assert not llama.avoid_amx()
    assert c.llama_model_default_params().use_extra_bufts
    monkeypatch.setattr(llama, "cpu_has_amx", lambda: True)
    assert llama.avoid_amx()
    assert not llama.avoid_amx(), "once per process"
    params, before = c.llama_model_default_params(), defaults()
    assert before.use_extra_bufts and not params.use_extra_bufts
    others = [name for name, _ in params._fields_ if name != "use_extra_bufts"]
    assert [str(getattr(params, n)) for n in others] == [str(getattr(before, n)) for n in others]


WEATHER: list[Tool] = [{
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                       "required": ["city"]},
    },
}]  # fmt: skip
FORCED: ToolChoice = {"type": "function", "function": {"name": "get_weather"}}
ASK_WEATHER: list[ChatMessage] = [
    {"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "content": "What is the weather in Paris?"},
]


def call_of(deltas: list[Delta]) -> tuple[str, dict[str, object]]:
    calls = [d for d in deltas if isinstance(d, ToolCallDelta)]
    assert calls and calls[0].call_id and calls[0].name, deltas
    assert all(d.index == 0 for d in calls)
    return calls[0].name, json.loads("".join(d.arguments for d in calls))


async def test_the_embedded_model_calls_a_forced_tool_with_arguments_that_parse() -> None:
    llm = LlamaCppLLM(LlmSettings(max_tokens=48))
    try:
        deltas = [d async for d in llm.stream(ASK_WEATHER, tools=WEATHER, tool_choice=FORCED)]
        name, arguments = call_of(deltas)
        assert name == "get_weather" and isinstance(arguments.get("city"), str)
        # The tool's result comes back, and the model answers in words.
        answered: list[ChatMessage] = [
            *ASK_WEATHER,
            {"role": "assistant", "content": None, "tool_calls": [{
                "id": "call_1", "type": "function",
                "function": {"name": "get_weather", "arguments": json.dumps(arguments)}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": "Sunny and 21 degrees."},
        ]  # fmt: skip
        words = [d async for d in llm.stream(answered, tools=WEATHER, tool_choice="none")]
        assert all(isinstance(d, str) for d in words) and "".join(words).strip()  # type: ignore[arg-type]
        # "auto" lets the model choose; either way the stream is well formed.
        chosen = [d async for d in llm.stream(ASK_WEATHER, tools=WEATHER, tool_choice="auto")]
        if any(isinstance(d, ToolCallDelta) for d in chosen):
            call_of(chosen)
        else:
            assert "".join(d for d in chosen if isinstance(d, str)).strip()
        with pytest.raises(EngineError, match="not among the tools"):
            bad: ToolChoice = {"type": "function", "function": {"name": "nope"}}
            [d async for d in llm.stream(ASK_WEATHER, tools=WEATHER, tool_choice=bad)]
    finally:
        await llm.aclose()


async def test_the_client_reads_streamed_tool_calls(llama_tools_server: LlamaServer) -> None:
    """llama.cpp's server with its function-calling chat format streams tool_calls deltas,
    as vLLM does with a tool-call parser."""
    llm = OpenAICompatLLM(LlmSettings(base_url=llama_tools_server.url, model="m", max_tokens=48))
    try:
        deltas = [d async for d in llm.stream(ASK_WEATHER, tools=WEATHER, tool_choice=FORCED)]
        name, arguments = call_of(deltas)
        assert name == "get_weather" and isinstance(arguments.get("city"), str)
    finally:
        await llm.aclose()
