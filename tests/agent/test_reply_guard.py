"""The reply guard: what a small model babbles is cut, what a reply means to say is not."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator

import pytest

from app.agent.length import instructed_sentences, sentences_allowed
from app.agent.reply_guard import ReplyGuard, guarded
from app.agent.responders import AgentResponder, Piece, SpeechRequest
from app.agent.timings import TurnTimings
from app.config import LlmSettings, TtsSettings
from app.engines import Engines
from app.engines.kokoro_edges import pause_after
from app.engines.tts import KokoroTTS
from app.vocab.chat import ChatMessage, Delta, TokenCount, Tool, ToolCallDelta, ToolChoice
from tests.session.fakes import FakeSTT


def run(
    text: str, soft_words: int | None = None, *, by: int = 3, sentences: int | None = None
) -> tuple[str, str | None]:
    """`text` streamed through a guard in deltas of `by` characters, as tokens come."""
    guard = ReplyGuard(soft_words, sentences)
    out = "".join(guard.push(text[i : i + by]) for i in range(0, len(text), by))
    if guard.stopped is None:
        out += guard.finish()
    return out, guard.stopped


@pytest.mark.parametrize(
    "reply",
    [
        "The capital of France is Paris.",
        "Sure! I'd be happy to help. What time works for you?",
        "That is very, very good news.",
        "Thank you. Thank you so much for calling.",
        "Plan A: take the train. Plan B: drive.",
        "Two plus two is four.\nAnything else?",
        "It costs 3.50 dollars, or about 1,000 yen.",
        "No, no, no worries at all.",
    ],
)
def test_what_a_reply_means_to_say_passes_whole(reply: str) -> None:
    assert run(reply) == (reply, None)


def test_text_without_spaces_passes_clause_by_clause() -> None:
    """Japanese has no spaces between words: its first clause must not wait for the end."""
    guard = ReplyGuard(50)
    assert guard.push("はい、") == "はい、"
    assert guard.push("東京は日本の首都です。") == "東京は日本の首都です。"
    assert ReplyGuard(50).push("ก" * 41) == "ก" * 41, "a long run with no mark at all"
    assert run("東京です。東京です。") == ("東京です。", "loop")


def test_a_speaker_tag_that_opens_the_reply_is_not_said() -> None:
    assert run("Assistant: Hello, how can I help?") == ("Hello, how can I help?", None)


@pytest.mark.parametrize(
    ("reply", "said"),
    [
        ("Paris is the capital. User: And Germany? Assistant: Berlin.", "Paris is the capital."),
        ("Fine, thanks.\nQ: What is two plus two?\nA: Four.", "Fine, thanks.\n"),
        ("A: A: A: A: A: A: A: A: A:", ""),
        ("It is sunny today.<|im_end|><|im_start|>user", "It is sunny today."),
        ("Goodbye! <|im_start|>user\nHi", "Goodbye! "),
    ],
)
def test_the_next_speakers_turn_ends_the_reply(reply: str, said: str) -> None:
    out, stopped = run(reply)
    assert (out, stopped) == (said, "speaker_tag")


@pytest.mark.parametrize(
    ("unit", "most_words"),
    [
        ("ha ", 3),
        ("and then ", 5),
        ("I like cats. ", 3),
        ("We are in week twelve, which is twelve days. ", 9),
    ],
)
def test_a_reply_saying_the_same_again_and_again_stops(unit: str, most_words: int) -> None:
    out, stopped = run("Well, " + unit * 40)
    assert stopped == "loop"
    assert len(out.split()) <= 1 + most_words, out


def test_a_sentence_that_only_begins_as_an_earlier_one_is_said() -> None:
    reply = "I like cats. I like dogs too. I like cats and dogs."
    assert run(reply) == (reply, None)


SENTENCES = [f"Sentence number {n} has exactly seven words." for n in range(20)]


def test_a_long_reply_ends_at_the_sentence_after_its_limit() -> None:
    out, stopped = run(" ".join(SENTENCES), soft_words=20)
    assert stopped == "length"
    assert out == " ".join(SENTENCES[:3]) + " "  # 21 words: the sentence past 20 is whole


def test_a_sentence_still_open_well_past_the_limit_is_dropped() -> None:
    words = " ".join(f"word{n}" for n in range(50))
    assert run(f"One two three. {words}", soft_words=5) == ("One two three. ", "length")


def test_a_last_sentence_without_its_full_stop_is_said() -> None:
    assert run("One two three. Four five six", soft_words=5) == (
        "One two three. Four five six",
        None,
    )


def test_without_a_limit_a_long_reply_is_said_whole() -> None:
    reply = " ".join(f"Sentence number {n}." for n in range(100))
    assert run(reply) == (reply, None)


RAMBLE = (
    "Sure! The moon orbits the Earth every 27 days. It has no air of its own. Its pull "
    "makes the tides. People walked on it in 1969."
)


def test_a_reply_ends_after_its_sentences_and_an_opener_is_not_one() -> None:
    guard = ReplyGuard(50, sentences=2)
    out = "".join(guard.push(RAMBLE[i : i + 3]) for i in range(0, len(RAMBLE), 3))
    assert out == "Sure! The moon orbits the Earth every 27 days. It has no air of its own."
    assert guard.stopped == "length"
    hours = "It opens at 9 a.m. and shuts at 5 p.m. on weekdays. It is busy. It is big."
    assert run(hours, by=2, sentences=2) == (hours.removesuffix(" It is big.") + " ", "length")


@pytest.mark.parametrize(
    ("instructions", "allowed"),
    [
        (LlmSettings().system_prompt, 2),  # "one or two short spoken sentences"
        ("Answer in one short sentence.", 1),
        ("Keep it to a sentence or two.", 2),
        ("Use at most 3 sentences.", 3),
        ("You are a pirate. Say arr.", None),  # they do not say
    ],
)
def test_the_instructions_say_how_many_sentences(instructions: str, allowed: int | None) -> None:
    assert instructed_sentences(instructions) == allowed


@pytest.mark.parametrize(
    ("asked", "language", "allowed"),
    [
        ("Tell me about the moon, I was wondering, you know, about it?", "en", 2),
        ("How long is the Nile?", "en", 2),
        ("Tell me a long story about a brave knight.", "en", None),
        ("How do I boil an egg?", "en", None),
        ("Can you explain how tides work?", "en", None),
        ("Erzähl mir vom Mond.", "de", None),  # no limit where "asks for more" is not known
    ],
)
def test_the_limit_is_lifted_when_the_user_asks_for_more(
    asked: str, language: str, allowed: int | None
) -> None:
    prompt: list[ChatMessage] = [
        {"role": "system", "content": "Answer in one or two sentences."},
        {"role": "user", "content": "Tell me a story."},  # an earlier turn does not count
        {"role": "assistant", "content": "Once upon a time, there was a cat."},
        {"role": "user", "content": asked},
    ]
    assert sentences_allowed(prompt, language) == allowed


class ScriptedLLM:
    """Writes `text` a word at a time, whatever it is asked."""

    model_name = "scripted"

    def __init__(self, text: str) -> None:
        self.text = text

    async def stream(self, messages: list[ChatMessage], **_: object) -> AsyncGenerator[Delta, None]:
        for word in self.text.split(" "):
            yield word + " "

    async def aclose(self) -> None: ...


@pytest.mark.parametrize(
    ("asked", "max_tokens", "said"),
    [
        ("What about the moon?", None, "Sure! The moon orbits the Earth every twenty-seven "
         "days. It has no air of its own."),
        ("Tell me a story about the moon.", None, RAMBLE.replace("27", "twenty-seven")
         .replace("1969", "nineteen sixty-nine")),
        ("What about the moon?", 400, RAMBLE.replace("27", "twenty-seven")
         .replace("1969", "nineteen sixty-nine")),  # a response that sets its own length
    ],
)  # fmt: skip
async def test_the_voice_says_what_the_limit_lets_through(
    asked: str, max_tokens: int | None, said: str, kokoro: KokoroTTS
) -> None:
    responder = AgentResponder(
        Engines(stt=FakeSTT(), llm=ScriptedLLM(RAMBLE), tts=kokoro), max_spoken_words=50
    )
    prompt: list[ChatMessage] = [
        {"role": "system", "content": LlmSettings().system_prompt},
        {"role": "user", "content": asked},
    ]
    request = SpeechRequest(
        "sess_len", prompt, b"", "jf_alpha", 1.0, TurnTimings(), max_tokens=max_tokens
    )
    pieces = [piece async for piece in responder.speak(request)]
    assert " ".join(p.text for p in pieces if isinstance(p, Piece) and p.text) == said


@pytest.mark.parametrize(
    ("tools", "choice", "refused"), [(False, None, True), (True, None, False), (True, "none", True)]
)
async def test_without_a_tool_the_voice_never_promises_to_act(
    tools: bool, choice: ToolChoice | None, refused: bool, kokoro: KokoroTTS
) -> None:
    """Qwen2.5-Coder-0.5B agreed to order a pizza; with a tool to call, what it says
    around the call is its own (not with tool_choice none: then it has none)."""
    promise = "Sure, I can order a pizza for you. It will arrive soon."
    responder = AgentResponder(Engines(stt=FakeSTT(), llm=ScriptedLLM(promise), tts=kokoro))
    pizza: Tool = {"type": "function", "function": {"name": "order_pizza", "parameters": {}}}
    request = SpeechRequest(
        "sess_act", [{"role": "user", "content": "Order me a pizza."}], b"", "jf_alpha", 1.0,
        TurnTimings(), tools=[pizza] if tools else None, tool_choice=choice,
    )  # fmt: skip
    pieces = [piece async for piece in responder.speak(request)]
    words = " ".join(p.text for p in pieces if isinstance(p, Piece) and p.text)
    assert words == ("Sorry, I cannot do that: I can only talk." if refused else promise)


class LoopingLLM:
    """A model stuck in a loop: the same words until someone stops it."""

    model_name = "looping"

    def __init__(self, unit: str) -> None:
        self.unit = unit
        self.tokens = 0
        self.closed = asyncio.Event()

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
        try:
            for _ in range(2000):
                for word in self.unit.split(" "):
                    self.tokens += 1
                    yield word + " "
                    await asyncio.sleep(0)
        finally:
            self.closed.set()

    async def aclose(self) -> None: ...


@pytest.fixture(scope="module")
def kokoro() -> KokoroTTS:
    tts = KokoroTTS(TtsSettings())
    yield tts
    tts.close()


@pytest.mark.parametrize("unit", ["A:", "Ha", "I like cats.", "We're currently in week twelve."])
async def test_a_looping_model_is_cut_within_two_seconds_of_audio(
    unit: str, kokoro: KokoroTTS
) -> None:
    """The real Kokoro speaks what the guard lets through; the model's stream is closed."""
    llm = LoopingLLM(unit)
    responder = AgentResponder(Engines(stt=FakeSTT(), llm=llm, tts=kokoro), max_spoken_words=60)
    request = SpeechRequest(
        "sess_loop", [{"role": "user", "content": "Tell me a short joke."}], b"", "jf_alpha",
        1.0, TurnTimings(),
    )  # fmt: skip
    audio_s, last = 0.0, ""
    async for piece in responder.speak(request):
        assert isinstance(piece, Piece)
        # A clause's later parts have no text of their own (its first part has it).
        audio_s, last = audio_s + piece.speech.duration_s, piece.text or last
    await asyncio.wait_for(llm.closed.wait(), 5)
    audio_s -= pause_after(last)  # the silence after the last word is not said
    assert audio_s <= 2.0, f"{audio_s:.2f} s of {unit!r} said"
    assert llm.tokens < 40, "the generation was stopped, not run to its end"


async def test_tool_calls_pass_the_guard_untouched() -> None:
    async def deltas() -> AsyncGenerator[Delta, None]:
        yield ToolCallDelta(0, call_id="call_1", name="lights")
        yield ToolCallDelta(0, arguments='{"room": "kitchen"}')
        yield "Done."

    out = [delta async for delta in guarded(deltas(), ReplyGuard())]
    assert out == [
        ToolCallDelta(0, call_id="call_1", name="lights"),
        ToolCallDelta(0, arguments='{"room": "kitchen"}'),
        "Done.",
    ]
