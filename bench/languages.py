"""Callers in other languages: how well and how fast each is heard, and answered.

    python -m bench.languages            # hearing, then voice-to-voice over WebRTC
    python -m bench.languages --quick    # hearing only

Hearing: four phrases per language, said by two speakers, espeak-ng's voice for the
language and the agent's own Kokoro (the voice app/vocab/languages.py picks), through
Whisper base (multilingual) detecting the language, with its 30 s window and a 20 s one,
over a phone line (G.711 μ-law at 8 kHz), and told the language; tiny.en on English for
comparison. Prints the word error rate (characters for Japanese), how often the language
was detected right, and the milliseconds per utterance. espeak-ng's Japanese reads no
kanji, so Japanese is said by Kokoro only.

Voice-to-voice: a server with --stt-language auto, four espeak-ng questions per
language over WebRTC, p50 from the end of the question to the first voiced frame of
the reply; English on the default (tiny.en) server too. It asserts nothing.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from app.agent.timings import STAGES
from app.audio import g711
from app.audio.resample import Resampler
from app.config import SttSettings, TtsSettings
from app.engines.stt import WhisperSTT
from app.engines.tts import KokoroTTS
from app.vocab.languages import spoken
from bench import quick_run
from bench.latency import percentile, run_concurrent
from tests.support.rooms import espeak
from tests.support.server import ServerProcess
from tests.support.speech import speak_to_wav, word_error_rate

PHRASES: dict[str, list[str]] = {
    "en": ["What is the capital of France?", "Please turn on the lights in the kitchen.",
           "How far is the moon from the earth?", "I would like to book a table for two people."],
    "es": ["¿Cuál es la capital de Francia?", "Por favor, enciende las luces de la cocina.",
           "¿Dónde está la estación de tren?", "Quiero reservar una mesa para dos personas."],
    "fr": ["Quelle est la capitale de l'Espagne ?",
           "Allume les lumières de la cuisine, s'il te plaît.", "Où est la gare ?",
           "Je voudrais réserver une table pour deux personnes."],
    "de": ["Was ist die Hauptstadt von Frankreich?", "Bitte schalte das Licht in der Küche ein.",
           "Wo ist der Bahnhof?", "Ich möchte einen Tisch für zwei Personen reservieren."],
    "it": ["Qual è la capitale della Francia?", "Per favore, accendi le luci in cucina.",
           "Dov'è la stazione?", "Vorrei prenotare un tavolo per due persone."],
    "pt": ["Qual é a capital da França?", "Por favor, acenda as luzes da cozinha.",
           "Onde fica a estação de trem?", "Eu gostaria de reservar uma mesa para duas pessoas."],
    "ja": ["フランスの首都はどこですか。", "台所の電気をつけてください。", "駅はどこですか。",
           "二人で予約したいです。"],
}  # fmt: skip
# espeak-ng's voice for each language (none for Japanese: it reads no kanji).
ESPEAK = {"en": "en-us", "es": "es", "fr": "fr-fr", "de": "de", "it": "it", "pt": "pt-br"}
V2V_LANGUAGES = ("en", "es", "fr", "de")


@dataclass
class Tally:
    errors: list[float] = field(default_factory=list)
    detected: int = 0
    ms: list[float] = field(default_factory=list)

    def line(self) -> str:
        heard = f"{len(self.errors)} said, error rate {statistics.mean(self.errors):.2f}"
        right = f"language right {self.detected}/{len(self.errors)}"
        return f"{heard}, {right}, {statistics.median(self.ms):.0f} ms p50"


def error_rate(language: str, reference: str, heard: str) -> float:
    """Word error rate; for Japanese, which has no spaces, character error rate."""
    if language != "ja":
        return word_error_rate(reference, heard)
    strip = str.maketrans("", "", "。、？！?!., ")
    return word_error_rate(" ".join(reference.translate(strip)), " ".join(heard.translate(strip)))


def pcm16k(samples: np.ndarray, rate: int) -> bytes:
    resampler = Resampler(16_000)
    lead, tail = np.zeros(rate // 4, np.float32), np.zeros(rate // 2, np.float32)
    audio = np.concatenate([lead, samples.astype(np.float32), tail])
    return resampler.pcm(audio, rate) + resampler.flush()


def phone_line(pcm: bytes) -> bytes:
    """16 kHz speech as it comes off a phone line: G.711 μ-law at 8 kHz."""
    down, up = Resampler(8_000), Resampler(16_000)
    samples = np.frombuffer(pcm, np.int16)
    ulaw = g711.encode(down.pcm(samples, 16_000) + down.flush(), "ulaw")
    return up.pcm(np.frombuffer(g711.decode(ulaw, "ulaw"), np.int16), 8_000) + up.flush()


async def utterances(tts: KokoroTTS) -> list[tuple[str, str, str, bytes]]:
    """(language, speaker, phrase, 16 kHz PCM) for every phrase and speaker."""
    said = []
    for language, phrases in PHRASES.items():
        voice = spoken(language).voice or TtsSettings().voice
        for phrase in phrases:
            if language in ESPEAK:
                audio = espeak(phrase, ESPEAK[language])
                said.append((language, "espeak-ng", phrase, pcm16k(audio, 16_000)))
            speech = await tts.synthesize(phrase, voice=voice, language=language)
            said.append((language, "kokoro", phrase, pcm16k(speech.samples, speech.rate)))
    return said


async def hearing() -> None:
    tts = KokoroTTS(TtsSettings())
    said = await utterances(tts)
    tts.close()
    setups = {
        "base, detected, 30 s window": (SttSettings(language="auto", min_window_s=30), None),
        "base, detected, 20 s window": (SttSettings(language="auto"), None),
        "base, detected, 20 s, over a phone line": (SttSettings(language="auto"), "phone"),
        "base, told the language, 30 s": (SttSettings(language="auto", min_window_s=30), "told"),
        "tiny.en (English only), 30 s": (SttSettings(), "en"),
    }
    for label, (settings, told) in setups.items():
        stt = WhisperSTT(settings)
        tallies: dict[tuple[str, str], Tally] = {}
        for language, speaker, phrase, pcm in said:
            if told == "en" and language != "en":
                continue
            asked = language if told == "told" else None
            if told == "phone":
                pcm = phone_line(pcm)
            started = time.perf_counter()
            heard = await stt.transcribe(pcm, language=asked)
            tally = tallies.setdefault((language, speaker), Tally())
            tally.ms.append((time.perf_counter() - started) * 1000)
            tally.errors.append(error_rate(language, phrase, heard.text))
            tally.detected += heard.language == language
        stt.close()
        print(f"\n== {label}")
        for (language, speaker), tally in tallies.items():
            print(f"  {language} {speaker:9s} {tally.line()}")
        every = [ms for tally in tallies.values() for ms in tally.ms]
        print(f"  all: {statistics.median(every):.0f} ms p50, {percentile(every, 95):.0f} ms p95")


async def voice_to_voice(folder: Path) -> None:
    for flags, languages in ((["--stt-language", "auto"], V2V_LANGUAGES), ([], ("en",))):
        server = ServerProcess(["--max-sessions", "1", *flags], folder / "server.log")
        server.wait_healthy()
        try:
            print(f"\n== voice-to-voice, server {' '.join(flags) or '(default: tiny.en)'}")
            for language in languages:
                wavs = []
                for n, phrase in enumerate(PHRASES[language]):
                    wav = folder / f"{language}{n}.wav"
                    speak_to_wav(phrase, wav, voice=ESPEAK[language])
                    wavs.append(wav)
                run = await run_concurrent(server.url, server.proc.pid, 1, len(wavs), wavs)
                v2v = [t.v2v_s * 1000 for t in run.results.turns if t.v2v_s is not None]
                print(
                    f"  {language}: {len(v2v)} turns, p50 {percentile(v2v, 50):.0f} ms, "
                    f"max {max(v2v):.0f} ms; server stages p50, ms from the end of speech: "
                    + ", ".join(
                        f"{stage} {statistics.median(t.timings_ms[stage] for t in turns):.0f}"
                        for stage in STAGES
                        if (turns := [t for t in run.results.turns if stage in t.timings_ms])
                    )
                )
        finally:
            server.stop()


def main(argv: list[str] | None = None) -> int:
    quick = quick_run(__doc__, "hearing only, no server", argv)
    asyncio.run(hearing())
    if not quick:
        asyncio.run(voice_to_voice(Path(tempfile.mkdtemp(prefix="bench-languages-"))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
