"""llama.cpp in-process: the embedded LLM, with tools by prompt and grammar.

Small models are not told tools in their own format (SmolLM2 has none). Offered tools
are described in the system prompt; a call is written `functions.<name>:` and
then its arguments, generated under a grammar made from the tool's JSON schema,
so they always parse. A forced tool_choice skips straight to the arguments;
"auto" first lets the model choose between a function and a plain message,
under a grammar too. Tool results come back as notes from the user.
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
import uuid
from collections.abc import AsyncGenerator, Iterator
from typing import Any, cast

from app.config import LlmSettings
from app.engines.cpu import cpu_info
from app.engines.cpu_turns import CpuTurns
from app.engines.gate import Gate, default_threads
from app.engines.llm import choice_deltas
from app.engines.llm_models import EMBEDDED, gguf_path
from app.errors import EngineError
from app.vocab.chat import ChatMessage, Delta, TokenCount, Tool, ToolCallDelta, ToolChoice
from app.vocab.persona import filled

log = logging.getLogger(__name__)

# Tokens the embedded worker may run ahead of its reader.
TOKEN_QUEUE_SIZE = 2
# Reading ahead goes after everything else at the gate, a slice at a time: a turn that
# comes meanwhile waits for one slice at most (~0.1 s on two cores).
AHEAD_PRIORITY = 9
AHEAD_SLICE = 16
CALL_PREFIX = "functions."
MESSAGE = "message:"


def cpu_has_amx(cpuinfo: str = "/proc/cpuinfo") -> bool:
    return "amx_int8" in cpu_info(cpuinfo)[1]


def avoid_amx() -> bool:
    """On a CPU with AMX, llama.cpp repacks the weights for it and segfaults at the first
    decode on some machines (seen on 2 vCPUs of a Sapphire Rapids here; ggml-org/llama.cpp
    #20824). There, every Llama this process makes keeps its weights as they are: no extra
    buffer types, as llama.cpp's own --no-repack. Llama() takes no such argument, so its
    defaults are changed. Returns whether they were."""
    import llama_cpp.llama_cpp as c

    if not cpu_has_amx() or hasattr(c.llama_model_default_params, "repacking"):
        return False
    defaults = c.llama_model_default_params

    def without_repacking() -> Any:
        params = defaults()
        params.use_extra_bufts = False
        return params

    without_repacking.repacking = defaults  # type: ignore[attr-defined]
    c.llama_model_default_params = without_repacking
    log.info("llm: this CPU has AMX; llama.cpp keeps its weights unrepacked (llama.cpp#20824)")
    return True


class LlamaCppLLM:
    """llama.cpp in-process, behind a gate of one: a Llama context is not re-entrant."""

    reads_ahead = True

    def __init__(self, settings: LlmSettings, turns: CpuTurns | None = None) -> None:
        """`turns`: shared with a synthesis on the same cores (each token is a turn)."""
        from llama_cpp import Llama

        avoid_amx()
        self._settings = settings
        self._turns = turns or CpuTurns()
        path = settings.model_path or gguf_path(settings.embedded)
        self.model_name = (
            path.rsplit("/", 1)[-1] if settings.model_path else EMBEDDED[settings.embedded].title
        )
        started = time.perf_counter()
        self._llama = Llama(
            model_path=path,
            n_ctx=settings.n_ctx,
            n_threads=settings.n_threads or default_threads(),
            verbose=False,
        )
        self._gate = Gate("llm", 1)
        self._formatter = _chat_formatter(self._llama)
        self._start_formatter = _chat_formatter(self._llama, add_generation_prompt=False)
        # The first decode pays for buffer allocation; on the gate's one thread, which
        # makes every decode: from a second thread llama.cpp ran at 18 tokens/s, not 27.
        self._gate.call(self._warm_up)
        log.info(
            "llm loaded: llama.cpp %s (n_ctx=%d) on cpu in %.2fs",
            self.model_name,
            settings.n_ctx,
            time.perf_counter() - started,
        )

    def _warm_up(self) -> None:
        # With the default instructions: the first call's prompt then starts from cache.
        told = filled(self._settings.system_prompt, model=self.model_name, tools=False)
        hello: list[ChatMessage] = [
            {"role": "system", "content": told},
            {"role": "user", "content": "Hi"},
        ]
        for _ in self._deltas(hello, 2, None, None, None):
            pass

    async def read_ahead(self, messages: list[ChatMessage], *, unfinished: bool = False) -> None:
        """Reads `messages` into the context, as the next prompt will start, where the
        context holds something else: the reply as it was generated rather than as it was
        heard, or a conversation whose oldest messages were just dropped. `unfinished`:
        the last message is the user's words so far, read up to their end. It stops,
        keeping what it read, as soon as any other engine work runs or waits."""
        if self._gate.busy or not self._gate.alone():
            return  # never queued: by the time its turn came, it would be read for nothing
        prompt = self._prompt_start(_as_plain_chat(messages), unfinished)
        stop = threading.Event()  # the caller gone (its session closed): the thread stops too
        read = await self._gate.run(
            self._read, prompt, stop, priority=AHEAD_PRIORITY, on_cancel=stop.set
        )
        if read:
            log.debug("llm: read %d prompt tokens ahead", read)

    def _prompt_start(self, messages: list[ChatMessage], unfinished: bool) -> str:
        """The prompt of `messages` up to where the user's next words go: after the last
        message's words where it is `unfinished`, else in a turn of their own, whose
        opening ("<|im_start|>user\n", 3 of the ~15 tokens a turn reads) is read too."""
        if unfinished:
            *before, last = messages
            so_far = f"{last['content'] or ''}{_WORDS_GO_HERE}"
            turn = [*before, cast(ChatMessage, {**last, "content": so_far})]
        else:
            turn = [*messages, {"role": "user", "content": _WORDS_GO_HERE}]
        opened: str = self._start_formatter(messages=turn).prompt
        at = opened.rfind(_WORDS_GO_HERE)
        if at >= 0:
            return opened[:at]
        return "" if unfinished else self._start_formatter(messages=messages).prompt

    def _read(self, prompt: str, stop: threading.Event) -> int:
        """Runs in the gate's thread; the tokens it read."""
        llama = self._llama
        tokens = llama.tokenize(prompt.encode(), add_bos=False, special=True)
        have = llama.longest_token_prefix(llama.input_ids[: llama.n_tokens].tolist(), tokens)
        start = have
        while start < len(tokens) and self._gate.alone() and not stop.is_set():
            llama.n_tokens = start  # eval() drops the context past it first
            llama.eval(tokens[start : start + AHEAD_SLICE])
            start = llama.n_tokens
        return start - have

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
        # A few tokens of slack only: when the reader (TTS) falls behind, the
        # worker blocks instead of racing ahead and taking the cores TTS needs.
        limit = max_tokens or self._settings.max_tokens
        deltas = self._gate.stream(
            lambda: self._deltas(messages, limit, tools, tool_choice, tokens),
            ahead=TOKEN_QUEUE_SIZE,
        )
        async with contextlib.aclosing(deltas):
            try:
                async for delta in deltas:
                    yield delta
            except EngineError:
                raise
            except Exception as exc:
                raise EngineError(f"llama.cpp failed: {exc!r}") from exc

    def _deltas(
        self,
        messages: list[ChatMessage],
        max_tokens: int,
        tools: list[Tool] | None,
        tool_choice: ToolChoice | None,
        tokens: TokenCount | None,
    ) -> Iterator[Delta]:
        """Runs in the gate's thread."""
        plain = _as_plain_chat(messages)
        if not tools or tool_choice == "none":
            yield from self._chat(plain, max_tokens, tokens)
            return
        prompt, stop = self._render(_with_tools(plain, tools))
        self._count_prompt(prompt, tokens)  # read to choose; a call goes on from it, cached
        tool = self._choose(prompt, stop, tools, tool_choice)
        if tool is None:
            yield from self._chat(plain, max_tokens, tokens)
            return
        name = tool["function"]["name"]
        yield ToolCallDelta(0, call_id=f"call_{uuid.uuid4().hex[:20]}", name=name)
        from llama_cpp import llama_grammar

        grammar = llama_grammar.LlamaGrammar.from_json_schema(
            json.dumps(tool["function"].get("parameters") or {"type": "object"}), verbose=False
        )
        chunks = self._llama.create_completion(
            prompt + f"{CALL_PREFIX}{name}:\n",
            grammar=grammar,
            stream=True,
            max_tokens=max_tokens,
            temperature=self._settings.temperature,
            stop=stop,
        )
        # stream=True: an iterator of chunks (the stubs also allow one response).
        for chunk in self._turns.each(cast(Iterator[Any], chunks)):
            text = chunk["choices"][0]["text"]
            if text:
                if tokens is not None:
                    tokens.completion += 1  # llama.cpp streams a token per chunk
                yield ToolCallDelta(0, arguments=text)

    def _chat(
        self, messages: list[ChatMessage], max_tokens: int, tokens: TokenCount | None
    ) -> Iterator[Delta]:
        chunks = self._llama.create_chat_completion(
            messages=list(messages),  # type: ignore[arg-type]
            stream=True,
            max_tokens=max_tokens,
            temperature=self._settings.temperature,
            repeat_penalty=self._settings.repetition_penalty,
        )
        if tokens is not None:
            self._count_prompt(self._render(messages)[0], tokens)
        for chunk in self._turns.each(cast(Iterator[Any], chunks)):
            deltas = choice_deltas(chunk)
            if deltas and tokens is not None:
                tokens.completion += 1
            yield from deltas

    def _count_prompt(self, prompt: str, tokens: TokenCount | None) -> None:
        """Before the prompt is read: what of it the context holds already."""
        if tokens is not None:
            llama = self._llama
            ids = llama.tokenize(prompt.encode(), add_bos=False, special=True)
            tokens.prompt += len(ids)
            tokens.cached += llama.longest_token_prefix(
                llama.input_ids[: llama.n_tokens].tolist(), ids
            )

    def _render(self, messages: list[ChatMessage]) -> tuple[str, list[str]]:
        rendered = self._formatter(messages=messages)
        stop = rendered.stop
        return rendered.prompt, [stop] if isinstance(stop, str) else list(stop or [])

    def _choose(
        self, prompt: str, stop: list[str], tools: list[Tool], tool_choice: ToolChoice | None
    ) -> Tool | None:
        """Which tool to call (None: answer in words), as tool_choice allows."""
        by_name = {tool["function"]["name"]: tool for tool in tools}
        if isinstance(tool_choice, dict):
            name = (tool_choice.get("function") or {}).get("name")
            if name not in by_name:
                raise EngineError(f"tool_choice names {name!r}, which is not among the tools")
            return by_name[name]
        if tool_choice == "required" and len(by_name) == 1:
            return next(iter(by_name.values()))
        from llama_cpp import llama_grammar

        options = [f'"{CALL_PREFIX}{name}:"' for name in by_name]
        if tool_choice != "required":
            options.append(f'"{MESSAGE}"')
        grammar = llama_grammar.LlamaGrammar.from_string(
            f"root ::= {' | '.join(options)}", verbose=False
        )
        choice = self._llama.create_completion(
            prompt, grammar=grammar, max_tokens=32, temperature=0.0, stop=stop
        )
        text = str(choice["choices"][0]["text"])  # type: ignore[index]
        return by_name.get(text.removeprefix(CALL_PREFIX).removesuffix(":"))

    async def aclose(self) -> None:
        self._gate.close()


# Where a rendered prompt's next user message begins: a private-use character no
# template trims or escapes.
_WORDS_GO_HERE = "\ue000"


def _chat_formatter(llama: Any, *, add_generation_prompt: bool = True) -> Any:
    """The model's own chat template, to write prompts that go on with a call; without
    the generation prompt, the start of a prompt to come."""
    from llama_cpp import llama_chat_format

    template = llama.metadata.get("tokenizer.chat_template")
    if not template:
        return llama_chat_format.Jinja2ChatFormatter(
            template=CHATML,
            eos_token="<|im_end|>",
            bos_token="",
            add_generation_prompt=add_generation_prompt,
        )
    eos, bos = llama.token_eos(), llama.token_bos()
    return llama_chat_format.Jinja2ChatFormatter(
        template=template,
        eos_token=llama._model.token_get_text(eos) if eos != -1 else "",
        bos_token=llama._model.token_get_text(bos) if bos != -1 else "",
        add_generation_prompt=add_generation_prompt,
    )


CHATML = (
    "{% for message in messages %}<|im_start|>{{ message.role }}\n{{ message.content }}"
    "<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def _with_tools(messages: list[ChatMessage], tools: list[Tool]) -> list[ChatMessage]:
    """The system message, telling the model about the tools and how to call one."""
    lines = [
        f"- {t['function']['name']}: {t['function'].get('description', '')} "
        f"Arguments (JSON schema): {json.dumps(t['function'].get('parameters') or {})}"
        for t in tools
    ]
    note = (
        "\n\nYou can call these functions:\n" + "\n".join(lines) + "\nTo call one, answer "
        f"'{CALL_PREFIX}<name>:' and then its arguments as JSON; otherwise answer the user."
    )
    head, *rest = messages
    if head["role"] != "system":
        return [{"role": "system", "content": note.strip()}, *messages]
    return [{"role": "system", "content": (head["content"] or "") + note}, *rest]


def _as_plain_chat(messages: list[ChatMessage]) -> list[ChatMessage]:
    """Tool calls and results as plain messages, for a model without a tool format.

    A call is left out and its result comes as the user's note: shown its own call
    syntax, SmolLM2 repeats it instead of answering (6 of 6 answers used a JSON
    result this way, against 2 of 6 with the result as a system note).
    """
    names: dict[str, str] = {}
    plain: list[ChatMessage] = []
    for message in messages:
        calls = message.get("tool_calls") or []
        names.update({call["id"]: call["function"]["name"] for call in calls})
        if message["role"] == "tool":
            name = names.get(message.get("tool_call_id", ""), "the function")
            note = f"({name} returned: {message['content']}) Please answer my question with it."
            plain.append({"role": "user", "content": note})
        elif not calls:
            plain.append({"role": message["role"], "content": message["content"]})
    return plain
