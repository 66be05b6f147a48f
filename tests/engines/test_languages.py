"""Other languages than English through the real engines: the bundled multilingual
Whisper base (joined from its two packages), and Kokoro reading each language."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from app.audio.resample import Resampler
from app.config import SttSettings, TtsSettings
from app.engines import whisper_models
from app.engines.stt import WhisperSTT
from app.engines.tts import KokoroTTS, Reading
from app.engines.whisper_models import english_model_path
from app.errors import EngineError
from tests.support.rooms import espeak
from tests.support.speech import have_espeak, word_error_rate

# espeak-ng sentences Whisper base hears as their language (bench/languages.py has more).
SPANISH = ("es", "Quiero reservar una mesa para dos personas.")
GERMAN = ("de", "Was ist die Hauptstadt von Frankreich?")


def spoken_pcm(voice: str, text: str) -> bytes:
    if not have_espeak():
        pytest.skip("espeak-ng is not installed (make test installs it)")
    samples = np.concatenate([np.zeros(4_000), espeak(text, voice), np.zeros(8_000)])
    return (samples * 32767).astype(np.int16).tobytes()


@pytest.fixture(scope="module", params=[30.0, 20.0], ids=["full-window", "short-window"])
def multilingual(request: pytest.FixtureRequest) -> WhisperSTT:
    return WhisperSTT(SttSettings(language="auto", min_window_s=request.param))


@pytest.mark.parametrize(("language", "text"), [SPANISH, GERMAN])
async def test_the_language_is_detected_per_utterance(
    multilingual: WhisperSTT, language: str, text: str
) -> None:
    heard = await multilingual.transcribe(spoken_pcm(language, text))
    assert heard.language == language, heard
    assert word_error_rate(text, heard.text) <= 0.34, heard.text
    # Told the language instead, it hears the same.
    told = await multilingual.transcribe(spoken_pcm(language, text), language=language)
    assert told.language == language and word_error_rate(text, told.text) <= 0.34, told


async def test_a_brief_look_hears_the_language_it_is_told(multilingual: WhisperSTT) -> None:
    heard = await multilingual.transcribe(
        spoken_pcm("es", "Sí, vale."), brief="backchannel", language="es"
    )
    assert heard.language == "es"
    assert "vale" in heard.text.lower(), heard.text


async def test_english_only_whisper_refuses_other_languages_by_name() -> None:
    english = WhisperSTT(SttSettings())
    assert english.languages == {"en"}
    with pytest.raises(EngineError, match="'es'") as refused:
        await english.transcribe(bytes(32_000), language="es")
    assert refused.value.code == "unsupported_language"
    with pytest.raises(EngineError, match="English-only"):
        WhisperSTT(SttSettings(model=english_model_path(), language="es"))


def test_whisper_base_is_joined_once_and_checked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "good"))
    folder = Path(whisper_models.multilingual_model_path())
    assert (folder / "model.bin").stat().st_size == 145_217_532
    assert sorted(p.name for p in folder.iterdir()) == [
        "config.json", "model.bin", "tokenizer.json", "vocabulary.txt",
    ]  # fmt: skip
    # Parts that do not join into the published file are refused, and nothing is left.
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "bad"))
    monkeypatch.setattr(whisper_models, "BASE_SHA256", "0" * 64)
    with pytest.raises(EngineError, match="sha256"):
        whisper_models.multilingual_model_path()
    assert not [p for p in (tmp_path / "bad").rglob("model.bin*")]


@pytest.fixture(scope="module")
def tts() -> KokoroTTS:
    return KokoroTTS(TtsSettings())


def test_each_language_is_read_by_its_own_phonemizer(tts: KokoroTTS) -> None:
    read = tts._phonemizer
    assert read("Hello.", "en") == Reading("en-us", "Hello.")
    assert read("I am Vera.", "en") == Reading("en-us", "I am Vaira."), "said as heard"
    assert read("Hola, soy Vera.", "es") == Reading("es", "Hola, soy Vera.")
    assert read("Bonjour.", "fr") == Reading("fr-fr", "Bonjour."), "espeak-ng has no plain fr"
    assert read("你好。", "zh") == Reading("cmn", "你好。")
    assert read("Apa kabar?", "jw") == Reading("en-us", "Apa kabar?"), "no voice: tts.lang's"
    language, phonemes, is_phonemes = read("今日は良い天気です。", "ja")
    assert language == "ja" and is_phonemes and "Chinese" not in phonemes, "kanji are read"


async def test_kokoro_speaks_each_language_whisper_hears_it_in(
    tts: KokoroTTS, multilingual: WhisperSTT
) -> None:
    for language, text in [("fr", "Bonjour, la capitale de la France est Paris."),
                           ("es", "La capital de Francia es París."),
                           ("ja", "フランスの首都はパリです。")]:  # fmt: skip
        speech = await tts.synthesize(text, voice="jm_kumo", language=language)
        resampler = Resampler(16_000)
        pcm = resampler.pcm(speech.samples, speech.rate) + resampler.flush()
        heard = await multilingual.transcribe(pcm)
        assert heard.language == language, (language, heard)
