"""Speech to text: one faster-whisper model per process, shared by every slot."""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from typing import Any, Protocol

import numpy as np

from app.audio.resample import s16_to_float
from app.config import SttSettings
from app.engines.gate import Gate, default_threads
from app.engines.whisper_models import english_model_path, multilingual_model_path
from app.errors import EngineError
from app.vocab.languages import AUTO, ENGLISH, NAMES
from app.vocab.speech import BriefLook, Transcript, WordScore

log = logging.getLogger(__name__)


class SpeechToText(Protocol):
    languages: frozenset[str]  # what it can hear: {"en"} for an English-only model
    model_name: str  # a name or a path

    async def transcribe(
        self,
        pcm16k: bytes,
        *,
        logprobs: bool = False,
        brief: BriefLook | None = None,
        language: str | None = None,
    ) -> Transcript:
        """16 kHz mono s16 PCM in, text out; `logprobs`: with a score per word. `brief`:
        speech to judge now, heard sooner and less surely than a turn: a second or so
        (is it a backchannel?), or the words of an utterance going on. `language`: what
        was spoken ("auto": detect it; None: stt.language)."""
        ...

    def close(self) -> None: ...


def bundled_model_path(language: str = ENGLISH) -> str:
    """The bundled Whisper for stt.language: tiny.en for English, base for the rest."""
    return english_model_path() if language == ENGLISH else multilingual_model_path()


class WhisperSTT:
    def __init__(self, settings: SttSettings) -> None:
        from faster_whisper import WhisperModel

        self._settings = settings
        self.model_name = settings.model or bundled_model_path(settings.language)
        started = time.perf_counter()
        self._model = WhisperModel(
            self.model_name,
            device=settings.device,
            compute_type=settings.compute_type,
            cpu_threads=settings.cpu_threads or default_threads(),
            num_workers=settings.concurrency,
        )
        multilingual = bool(self._model.model.is_multilingual)
        if not multilingual and settings.language != ENGLISH:
            raise EngineError(
                f"stt.model {self.model_name} is English-only, so stt.language must be en, not "
                f"{settings.language}; leave stt.model empty for the bundled multilingual "
                "Whisper base, or name a multilingual model"
            )
        self.languages = frozenset(NAMES) if multilingual else frozenset({ENGLISH})
        self._gate = Gate("stt", settings.concurrency)
        if not settings.min_window_s:
            bundled_base = not settings.model and multilingual
            window = BASE_WINDOW_S if bundled_base else 30.0
            settings = self._settings = settings.model_copy(update={"min_window_s": window})
        self._fast: ShortWindow | None = None
        if settings.min_window_s < 30:
            self._fast = ShortWindow(self._model, settings)
        # Greedy: the listener hears the reply held while it runs.
        brief = settings.model_copy(update={"min_window_s": BRIEF_WINDOW_S, "beam_size": 1})
        self._backchannel = ShortWindow(self._model, brief, primed=True)
        # Unprimed: of 78 looks at half and three quarters of 39 questions, 58 were the
        # start of the turn's transcript, 47 primed ("Um, how many..." for "How many...").
        self._words = ShortWindow(self._model, brief)
        self._transcribe_sync(np.zeros(16_000, dtype=np.float32))  # warm the kernels
        self._backchannel(np.zeros(16_000, dtype=np.float32), self._settings.language)
        log.info(
            "stt loaded: faster-whisper %s on %s/%s, %s%s in %.2fs",
            self.model_name,
            settings.device,
            settings.compute_type,
            "language detected per utterance"
            if settings.language == AUTO
            else f"language {settings.language}",
            f", {settings.min_window_s:g} s window",
            time.perf_counter() - started,
        )

    async def transcribe(
        self,
        pcm16k: bytes,
        *,
        logprobs: bool = False,
        brief: BriefLook | None = None,
        language: str | None = None,
    ) -> Transcript:
        language = language or self._settings.language
        if language != AUTO and language not in self.languages:
            raise EngineError(
                f"this server's Whisper ({self.model_name}) hears only English, not "
                f"{language!r}; start it with --stt-language auto",
                code="unsupported_language",
            )
        if not pcm16k:
            return Transcript("", () if logprobs else None)
        work: Callable[..., Transcript] = self._transcribe_sync
        if brief is not None:
            work = self._backchannel_sync if brief == "backchannel" else self._words_sync
        try:
            return await self._gate.run(
                work,
                s16_to_float(pcm16k),
                logprobs,
                language,
                timeout_s=self._settings.timeout_s,
            )
        except TimeoutError:
            raise EngineError(
                f"whisper took over {self._settings.timeout_s:g} s", code="stt_timeout"
            ) from None
        except EngineError:
            raise
        except Exception as exc:
            raise EngineError(f"whisper failed: {exc!r}", code="stt_failed") from exc

    def _backchannel_sync(self, audio: np.ndarray, logprobs: bool, language: str) -> Transcript:
        return self._backchannel(audio, language)

    def _words_sync(self, audio: np.ndarray, logprobs: bool, language: str) -> Transcript:
        return self._words(audio, language)

    def _transcribe_sync(
        self, audio: np.ndarray, logprobs: bool = False, language: str = ENGLISH
    ) -> Transcript:
        if not logprobs and self._fast is not None and len(audio) <= FAST_MAX_S * 16_000:
            return self._fast(audio, language)
        # Word scores come with word timestamps: the full path, and only when asked for.
        segments_run, info = self._model.transcribe(
            audio,
            language=None if language == AUTO else language,
            beam_size=self._settings.beam_size,
            without_timestamps=not logprobs,
            word_timestamps=logprobs,
            condition_on_previous_text=False,
            vad_filter=False,
        )
        segments = list(segments_run)
        text = " ".join(segment.text.strip() for segment in segments).strip()
        if not logprobs:
            return Transcript(text, language=info.language)
        words = tuple(
            WordScore(word.word, math.log(max(word.probability, 1e-12)))
            for segment in segments
            for word in segment.words or ()
        )
        return Transcript(text, words, language=info.language)

    def close(self) -> None:
        self._gate.close()


# The bundled Whisper base's window (stt.min_window_s 0). On bench/languages.py's 52
# utterances in seven languages, detecting each: mean error rate 0.45 (30 s: 0.47),
# language right 31 times (30 s: 33), 775 ms p50 (30 s: 1845, which encodes twice).
BASE_WINDOW_S = 20.0
# Utterances up to this long take the short-window path; longer ones the full one.
FAST_MAX_S = 28.0
# The window for a brief transcription: tiny.en on a second of speech in ~100 ms here.
# Shorter windows misheard backchannels more often ("Yeah" as "The F" at 5 s); a 20 s
# one heard 60 of 72 as backchannels where 10 s heard 56, but held each ~120 ms longer.
BRIEF_WINDOW_S = 10.0
# What the brief look is for: telling a backchannel from words. Primed with backchannels
# as the text before, Whisper spells them as such: of 72 (five Kokoro voices and four of
# espeak-ng's saying eight), 67 were heard as backchannels, 56 unprimed; of 216 real
# interruptions ("Stop.", "Okay, but why?", "Uh-huh, and the price?"), 214, 213 unprimed.
BRIEF_PROMPT = "Uh-huh, right, okay, mm-hmm, yeah, sure, I see."
# Silence appended before encoding, and the window's granularity, in mel frames (10 ms).
FAST_TAIL_FRAMES = 100
FAST_ROUND_FRAMES = 100


class ShortWindow:
    """Whisper on a window sized to the utterance instead of a fixed 30 s.

    The encoder's cost is proportional to its input, and faster-whisper always
    pads to 30 s, so a 2 s question costs as much as a 30 s monologue (~470 ms
    of encoder for tiny.en on 2 cores). CTranslate2 accepts shorter inputs
    (whisper.cpp calls this audio_ctx): a 10 s window encodes in ~60 ms, but
    accuracy drops below ~15 s, hence stt.min_window_s. The utterance gets at
    least 1 s of silence after it so the decoder sees it end. A language to detect
    is detected on the same encoding.
    """

    def __init__(self, model: Any, settings: SttSettings, *, primed: bool = False) -> None:
        """`primed`: Whisper takes backchannels as what was said before (BRIEF_PROMPT)."""
        self._model = model
        self._beam_size = settings.beam_size
        self._primed = primed
        # Much shorter windows make Whisper repeat itself or mishear (seen at 2-15 s).
        self._min_frames = int(settings.min_window_s * 100)
        self._prompts: dict[str, tuple[Any, list[int]]] = {}

    def _prompt(self, language: str) -> tuple[Any, list[int]]:
        """The tokenizer and the decoder's prompt for `language`, made once each."""
        if language not in self._prompts:
            from faster_whisper.tokenizer import Tokenizer

            multilingual = self._model.model.is_multilingual
            tokenizer = Tokenizer(
                self._model.hf_tokenizer, multilingual, task="transcribe", language=language
            )
            # Primed in English only: a Spanish primer made "¿Cuál es la capital de
            # Francia?" "Vale," (an interruption heard as a backchannel).
            primed = self._primed and language == ENGLISH
            before = tokenizer.encode(" " + BRIEF_PROMPT) if primed else []
            prompt = self._model.get_prompt(tokenizer, before, without_timestamps=True)
            self._prompts[language] = (tokenizer, prompt)
        return self._prompts[language]

    def __call__(self, audio: np.ndarray, language: str) -> Transcript:
        hop = self._model.feature_extractor.hop_length
        frames = len(audio) // hop + FAST_TAIL_FRAMES
        frames = -(-frames // FAST_ROUND_FRAMES) * FAST_ROUND_FRAMES
        frames = max(frames, self._min_frames)
        padded = np.zeros(frames * hop, dtype=np.float32)
        padded[: len(audio)] = audio
        features = self._model.feature_extractor(padded)[:, :frames]
        encoded = self._model.encode(features)
        if language == AUTO:
            language = self._detect(encoded)
        tokenizer, prompt = self._prompt(language)
        # ~3 tokens per second of speech is typical; the cap stops a runaway loop.
        max_length = len(prompt) + 16 + int(len(audio) / 16_000 * 8)
        result = self._model.model.generate(
            encoded,
            [prompt],
            beam_size=self._beam_size,
            max_length=min(max_length, 448),
            return_no_speech_prob=True,
            suppress_blank=True,
        )[0]
        if result.no_speech_prob > NO_SPEECH_PROB:
            return Transcript("", language=language)
        tokens = [t for t in result.sequences_ids[0] if t < tokenizer.eot]
        return Transcript(str(tokenizer.decode(tokens)).strip(), language=language)

    def _detect(self, encoded: Any) -> str:
        if not self._model.model.is_multilingual:
            return ENGLISH
        ranked = self._model.model.detect_language(encoded)[0]
        code = str(ranked[0][0]).strip("<|>")
        return code if code in NAMES else ENGLISH


# Above this, Whisper itself says the audio held no speech (a cough, a door).
NO_SPEECH_PROB = 0.6
