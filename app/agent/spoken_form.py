"""What the voice says of the LLM's text: its words as a person would say them.

A model writes for a screen: markdown, tables, code, links, emoji, "16.1 km". Kokoro
reads what it is given, so a markdown table came out as "Day Temperature (°C) ------
Monday 75°C". Each clause passes through here between the chunker and the voice, from
whichever LLM wrote it (embedded or a server), and the transcript is what was said.

- Markup goes: emphasis, headings, list, quote and rule markers, HTML tags. A link says
  its text, an image its alt text, a table row its cells, a web address its site.
- Code is not read: a fenced block is dropped, from its opening fence to its closing
  one, across clauses (a SpokenForm holds that state for one reply).
- Emoji and other pictographs go.
- In English, numbers, units and symbols become words: "16.1 km" -> "sixteen point one
  kilometres", "$5.50" -> "five dollars and fifty cents", "3:30 pm" -> "three thirty p
  m", "21st" -> "twenty-first", "1990" -> "nineteen ninety". In another language they
  are left to espeak-ng, which reads digits in that language. "Can't" becomes
  "cannot", which no listener mistakes for "can". A chemical symbol, where the clause
  speaks of a symbol, is spelled: "Au" -> "A-U" (read as written, it is heard "all").
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable

from app.vocab.languages import ENGLISH

FENCE = "```"
_ONES = [
    "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
    "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen",
    "eighteen", "nineteen",
]  # fmt: skip
_TENS = ["", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"]
_SCALES = ((10**12, "trillion"), (10**9, "billion"), (10**6, "million"), (1000, "thousand"))
# Each number word's value, for reading figures back out of words (app/agent/reckoning.py).
WORD_VALUES = {word: n for n, word in enumerate(_ONES)} | {
    word: 10 * n for n, word in enumerate(_TENS) if word
}
SCALE_VALUES = {"hundred": 100} | {name: scale for scale, name in _SCALES}
_ORDINAL_WORDS = {
    "one": "first", "two": "second", "three": "third", "five": "fifth", "eight": "eighth",
    "nine": "ninth", "twelve": "twelfth",
}  # fmt: skip
# unit after a number -> (singular, plural)
_UNITS: dict[str, tuple[str, str]] = {
    "km": ("kilometre", "kilometres"), "m": ("metre", "metres"),
    "cm": ("centimetre", "centimetres"), "mm": ("millimetre", "millimetres"),
    "kg": ("kilogram", "kilograms"), "g": ("gram", "grams"), "mg": ("milligram", "milligrams"),
    "l": ("litre", "litres"), "L": ("litre", "litres"), "ml": ("millilitre", "millilitres"),
    "mL": ("millilitre", "millilitres"), "lb": ("pound", "pounds"), "lbs": ("pound", "pounds"),
    "oz": ("ounce", "ounces"), "mi": ("mile", "miles"), "ft": ("foot", "feet"),
    "mph": ("mile per hour", "miles per hour"),
    "km/h": ("kilometre per hour", "kilometres per hour"),
    "kph": ("kilometre per hour", "kilometres per hour"), "h": ("hour", "hours"),
    "hr": ("hour", "hours"), "hrs": ("hour", "hours"), "min": ("minute", "minutes"),
    "mins": ("minute", "minutes"), "sec": ("second", "seconds"),
    "secs": ("second", "seconds"), "ms": ("millisecond", "milliseconds"),
    "kB": ("kilobyte", "kilobytes"), "KB": ("kilobyte", "kilobytes"),
    "MB": ("megabyte", "megabytes"), "GB": ("gigabyte", "gigabytes"),
    "TB": ("terabyte", "terabytes"), "Hz": ("hertz", "hertz"), "kHz": ("kilohertz", "kilohertz"),
    "MHz": ("megahertz", "megahertz"), "GHz": ("gigahertz", "gigahertz"),
    "W": ("watt", "watts"), "kW": ("kilowatt", "kilowatts"),
    "kWh": ("kilowatt hour", "kilowatt hours"),
    "V": ("volt", "volts"),
}  # fmt: skip
_CURRENCIES = {"$": ("dollar", "dollars", "cent", "cents"), "€": ("euro", "euros", "cent", "cents"),
               "£": ("pound", "pounds", "penny", "pence")}  # fmt: skip
_SYMBOLS = {
    "&": " and ", "+": " plus ", "=": " equals ", "×": " times ", "÷": " divided by ",
    "@": " at ", "~": " about ", "≈": " about ", "→": " to ", "←": " from ", "≤": " at most ",
    "≥": " at least ", "±": " plus or minus ", "/": " ",
}  # fmt: skip
_FRACTIONS = {
    "1/2": "one half", "1/3": "one third", "2/3": "two thirds", "1/4": "one quarter",
    "3/4": "three quarters", "½": "one half", "¼": "one quarter", "¾": "three quarters",
}  # fmt: skip

_NUMBER = r"\d+(?:\.\d+)?"
_UNIT_NAMES = "|".join(sorted(map(re.escape, _UNITS), key=len, reverse=True))
_UNIT = re.compile(rf"(?<![\w.])(-?{_NUMBER})\s?({_UNIT_NAMES})(?![\w/])")
_MONEY = re.compile(rf"([$€£])\s?({_NUMBER})(?:\s?(thousand|million|billion|trillion)\b)?")
_PERCENT = re.compile(rf"(-?{_NUMBER})\s?%")
_DEGREES = re.compile(rf"(-?{_NUMBER})\s?°(?:\s?([CF])\b)?")
_DECADE = re.compile(r"(?<![\w.])(1[1-9]\d0|20\d0)'?s\b")
_TIME = re.compile(r"\b(\d{1,2}):(\d{2})(?:\s?([ap])\.?\s?m\b)?(?![\w:])", re.IGNORECASE)
_ORDINAL = re.compile(r"\b(\d+)(?:st|nd|rd|th)\b")
_RANGE = re.compile(rf"(?<![\w.])({_NUMBER})\s?[-–—]\s?({_NUMBER})(?![\w.])")
_YEAR = re.compile(r"(?<![\w.,$€£])(1[1-9]\d\d|20\d\d)(?![\w%]|\.\d)")
# Not a number's first digits before ".5B" ("0.5B" read as "zero.5B"): the whole number or none.
_DECIMAL = re.compile(rf"(?<![\w.])(-?)({_NUMBER})(?!\w|\.\d)")
# A model's size in billions or millions of parameters: a decimal ("1.5B", or "1.5 B" as
# the instructions name the model), or a whole number before "model". Said "one point
# five B model", it was heard "1.5 B-mata" (Whisper tiny.en); "billion model", right.
_SIZE = re.compile(r"(?<![\w.])(\d+\.\d+|\d+(?=\s?[BM]\s(?:model|parameter)))\s?([BM])(?!\w|\.\d)")
# A number with a capital letter after it, as a screen's size or a seat: "4K", "3B".
_LETTERED = re.compile(rf"(?<![\w.])({_NUMBER})([A-Z])(?!\w|\.\d)")
# A name and its version written as one ("Qwen2.5", "GPT4"), or joined by a hyphen
# ("Coder-1.5B", "COVID-19"): apart, the number is read as one ("Qwen2.5-Coder" was heard
# "QN2. 5K"). A name's capital, so that a word of the user's ("word0") is left as it is.
_GLUED = re.compile(rf"\b([A-Z][A-Za-z]{{2,}})({_NUMBER})\b")
_NAME_HYPHEN = re.compile(r"(?<=[A-Za-z])-(?=\d)|(?<=\d)-(?=[A-Za-z])")
_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")
_FRACTION = re.compile(r"(?<![\w/])(?:[123]/[234]|[½¼¾])(?![\w/])")

_URL = re.compile(r"\b(?:https?://|www\.)(?:www\.)?([\w-]+(?:\.[\w-]+)+)\S*", re.IGNORECASE)
_IMAGE = re.compile(r"!\[([^\]]*)\]\([^)]*\)")
_LINK = re.compile(r"\[([^\]]+)\]\([^)]*\)")
_INLINE_CODE = re.compile(r"`([^`]*)`")
_BOLD = re.compile(r"(\*\*|__)(.+?)\1")
_EMPHASIS = re.compile(r"(?<!\w)([*_])(?!\s)(.+?)(?<!\s)\1(?!\w)")
_STRIKE = re.compile(r"~~(.+?)~~")
_HTML = re.compile(r"</?[a-zA-Z][^>]*>")
_HEADING = re.compile(r"^\s*#{1,6}\s+", re.MULTILINE)
_LIST_MARK = re.compile(r"^\s*(?:[-*+•]|\d{1,3}[.)])\s+", re.MULTILINE)
_QUOTE = re.compile(r"^\s*>+\s?", re.MULTILINE)
_RULE = re.compile(r"^\s*(?:[-*_=]\s*){3,}$", re.MULTILINE)
_TABLE_RULE = re.compile(r"^\s*\|?\s*:?-{2,}:?\s*(?:\|\s*:?-{2,}:?\s*)*\|?\s*$")
_ONLY_A_MARKER = re.compile(r"^\s*(?:[-*+•#>]+|\d{1,3}[.)])\s*$")
_ONLY_A_NUMBER = re.compile(r"^\s*(\d{1,3})[.)]\s*$")
# Kokoro's "can't" is heard as "can" ("You can park here."), which turns a reply around.
_CANT = re.compile(r"\b([Cc])an['’]t\b")
# Two-letter chemical symbols, which Kokoro reads as words: Whisper heard "Au" as "all",
# "Fe" as "phi", "Na" as "not". Spelled "A-U", they are said as letters (heard "AU").
_ELEMENTS = frozenset({
    "He", "Li", "Be", "Ne", "Na", "Mg", "Al", "Si", "Cl", "Ar", "Ca", "Sc", "Ti", "Cr",
    "Mn", "Fe", "Co", "Ni", "Cu", "Zn", "Ga", "Ge", "As", "Se", "Br", "Kr", "Rb", "Sr",
    "Zr", "Nb", "Mo", "Tc", "Ru", "Rh", "Pd", "Ag", "Cd", "In", "Sn", "Sb", "Te", "Xe",
    "Cs", "Ba", "La", "Ce", "Pr", "Nd", "Pm", "Sm", "Eu", "Gd", "Tb", "Dy", "Ho", "Er",
    "Tm", "Yb", "Lu", "Hf", "Ta", "Re", "Os", "Ir", "Pt", "Au", "Hg", "Tl", "Pb", "Bi",
    "Po", "At", "Rn", "Fr", "Ra", "Ac", "Th", "Pa", "Np", "Pu", "Am", "Cm", "Bk", "Cf",
    "Es", "Fm", "Md", "No", "Lr", "Rf", "Db", "Sg", "Bh", "Hs", "Mt", "Ds", "Rg", "Cn",
    "Nh", "Fl", "Mc", "Lv", "Ts", "Og",
})  # fmt: skip
# Symbols that are also words, capitalised where a sentence begins: "He is...".
_WORDLIKE = frozenset({"He", "Be", "As", "In", "At", "Am", "No", "Re", "Ho"})
_ELEMENT = re.compile(r"(?<![\w'’-])[A-Z][a-z](?![\w'’-])")
_SENTENCE_START = re.compile(r"(?:^|[.!?:]\s*)$")
_ALONE = re.compile(r"\W*([A-Z][a-z])\W*")
_SPACES = re.compile(r"\s+")
_SPACE_BEFORE_MARK = re.compile(r"\s+([,.;:!?)])")
_SPACE_AFTER_PAREN = re.compile(r"\(\s+")


def number_words(number: int) -> str:
    """An integer in English words: 342 -> "three hundred and forty-two"."""
    if number < 0:
        return "minus " + number_words(-number)
    if number < 20:
        return _ONES[number]
    if number < 100:
        tens, ones = divmod(number, 10)
        return _TENS[tens] + (f"-{_ONES[ones]}" if ones else "")
    if number < 1000:
        hundreds, rest = divmod(number, 100)
        return f"{_ONES[hundreds]} hundred" + (f" and {number_words(rest)}" if rest else "")
    for scale, name in _SCALES:
        if number >= scale:
            high, rest = divmod(number, scale)
            said = f"{number_words(high)} {name}"
            if not rest:
                return said
            return f"{said}{' and' if rest < 100 else ''} {number_words(rest)}"
    raise AssertionError(number)  # every positive number is reached above


def decimal_words(text: str) -> str:
    """ "16.1" -> "sixteen point one": the whole part as a number, the digits after the
    point one by one."""
    whole, _, fraction = text.partition(".")
    said = number_words(int(whole))
    if fraction:
        said += " point " + " ".join(_ONES[int(digit)] for digit in fraction)
    return said


def ordinal_words(number: int) -> str:
    """21 -> "twenty-first"."""
    said = number_words(number)
    head, sep, last = said.rpartition("-" if said.rpartition(" ")[2].count("-") else " ")
    if last in _ORDINAL_WORDS:
        last = _ORDINAL_WORDS[last]
    elif last.endswith("y"):
        last = last[:-1] + "ieth"
    else:
        last += "th"
    return f"{head}{sep}{last}"


def year_words(year: int) -> str:
    """1990 -> "nineteen ninety", 2005 -> "two thousand and five", 2024 -> "twenty
    twenty-four"."""
    high, low = divmod(year, 100)
    if 2000 <= year < 2010 or low == 0 and year % 1000 == 0:
        return number_words(year)
    if low == 0:
        return f"{number_words(high)} hundred"
    return f"{number_words(high)} {'oh ' if low < 10 else ''}{number_words(low)}"


def _plural(words: str) -> str:
    """ "nineteen ninety" -> "nineteen nineties"."""
    return words[:-1] + "ies" if words.endswith("y") else words + "s"


def _is_one(text: str) -> bool:
    return float(text) == 1 and "." not in text


def _unit(match: re.Match[str]) -> str:
    number, unit = match[1], match[2]
    singular, plural = _UNITS[unit]
    return f"{_signed(number)} {singular if _is_one(number.lstrip('-')) else plural}"


def _signed(text: str) -> str:
    return ("minus " if text.startswith("-") else "") + decimal_words(text.lstrip("-"))


def _money(match: re.Match[str]) -> str:
    one, many, cent, cents = _CURRENCIES[match[1]]
    amount, scale = match[2], match[3]
    if scale:
        return f"{decimal_words(amount)} {scale} {many}"
    whole, _, fraction = amount.partition(".")
    said = f"{number_words(int(whole))} {one if int(whole) == 1 else many}"
    if fraction and int(fraction[:2].ljust(2, "0")):
        hundredths = int(fraction[:2].ljust(2, "0"))
        said += f" and {number_words(hundredths)} {cent if hundredths == 1 else cents}"
    return said


def _degrees(match: re.Match[str]) -> str:
    scale = {"C": " Celsius", "F": " Fahrenheit"}.get(match[2] or "", "")
    return f"{_signed(match[1])} {'degree' if _is_one(match[1]) else 'degrees'}{scale}"


def _time(match: re.Match[str]) -> str:
    hour, minutes, half = int(match[1]), int(match[2]), (match[3] or "").lower()
    said = number_words(hour)
    if minutes:
        said += f" {'oh ' if minutes < 10 else ''}{number_words(minutes)}"
    elif not half:
        said += " o'clock"
    return said + (f" {half} m" if half else "")


def _range(match: re.Match[str]) -> str:
    return f"{decimal_words(match[1])} to {decimal_words(match[2])}"


def _symbols_spelled(text: str) -> str:
    """A chemical symbol in a clause about symbols, or alone ("Au.", a whole answer), as
    its letters: "Au" -> "A-U"."""
    alone = _ALONE.fullmatch(text)
    if alone and alone[1] in _ELEMENTS and alone[1] not in _WORDLIKE:
        return text.replace(alone[1], "-".join(alone[1].upper()))
    if "symbol" not in text.lower():
        return text

    def spelled(match: re.Match[str]) -> str:
        symbol = match[0]
        opens_sentence = _SENTENCE_START.search(text[: match.start()]) is not None
        if symbol not in _ELEMENTS or (symbol in _WORDLIKE and opens_sentence):
            return symbol
        return "-".join(symbol.upper())

    return _ELEMENT.sub(spelled, text)


def _decimal(match: re.Match[str]) -> str:
    return ("minus " if match[1] else "") + decimal_words(match[2])


# In this order: a pattern that reads a number with what surrounds it comes before the
# bare numbers (each rewrite leaves words, which the later ones do not match).
_ENGLISH: tuple[tuple[re.Pattern[str], Callable[[re.Match[str]], str]], ...] = (
    (_GLUED, lambda m: f"{m[1]} {m[2]}"),
    (_NAME_HYPHEN, lambda m: " "),
    (_FRACTION, lambda m: _FRACTIONS[m[0]]),
    (_TIME, _time),
    (_MONEY, _money),
    (_PERCENT, lambda m: f"{_signed(m[1])} percent"),
    (_DECADE, lambda m: _plural(year_words(int(m[1])))),
    (_DEGREES, _degrees),
    (_UNIT, _unit),
    (_ORDINAL, lambda m: ordinal_words(int(m[1]))),
    (_RANGE, _range),
    (_YEAR, lambda m: year_words(int(m[1]))),
    (_SIZE, lambda m: f"{decimal_words(m[1])} {'billion' if m[2] == 'B' else 'million'}"),
    (_LETTERED, lambda m: f"{decimal_words(m[1])} {m[2]}"),
    (_DECIMAL, _decimal),
    (_CANT, lambda m: f"{m[1]}annot"),
)


def _table_row(line: str) -> str:
    """A markdown table's row as its cells, read in turn; its rule line, nothing."""
    if "|" not in line:
        return line
    if _TABLE_RULE.match(line):
        return ""
    cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
    return ", ".join(cell for cell in cells if cell) + "."


def _pictograph(char: str) -> bool:
    """Emoji and the like: nothing a voice can say."""
    if char == "°":  # a symbol, but one espeak-ng reads in every language
        return False
    if 0x1F3FB <= ord(char) <= 0x1F3FF:  # skin tones
        return True
    return unicodedata.category(char) == "So" or char in "\u200d\ufe0f\ufe0e\u20e3"


class SpokenForm:
    """One reply's clauses as the voice should say them; it remembers an open code block."""

    def __init__(self, language: str = "") -> None:
        self._english = (language or ENGLISH) == ENGLISH
        self._in_code = False
        # "12." alone: a list's marker if more follows, else the whole answer ("12.").
        self._number = ""
        self._spoken = False  # whether any of the reply has been said yet

    def __call__(self, clause: str) -> str:
        """`clause` as said; empty when nothing of it can be said."""
        self._number = ""
        text = self._outside_code(clause)
        text = _IMAGE.sub(r"\1", text)
        text = _LINK.sub(r"\1", text)
        text = _URL.sub(r"\1", text)
        text = _INLINE_CODE.sub(r"\1", text)
        text = _HTML.sub(" ", text)
        text = _RULE.sub("", text)
        text = "\n".join(_table_row(line) for line in text.split("\n"))
        text = _HEADING.sub("", text)
        text = _QUOTE.sub("", text)
        text = _LIST_MARK.sub("", text)
        if number := _ONLY_A_NUMBER.match(text):
            self._number = f"{number[1]}."
        if _ONLY_A_MARKER.match(text):
            return ""
        said = self._said(text)
        self._spoken = self._spoken or bool(said)
        return said

    def last(self, clause: str) -> str:
        """`clause` as said where it ends the reply; where it is the whole reply, with a
        full stop if the model left none. Kokoro says a bare word without one so that it
        is heard as another ("Mice", the 1.5B's answer, as "Nice"); "Mice." is heard
        right. (A longer reply's last piece is left as it is: cut by the reply guard, it
        would only be drawn out.)"""
        alone = not self._spoken
        text = self(clause)
        return f"{text}." if alone and self._english and text[-1:].isalnum() else text

    def end(self) -> str:
        """What is left to say once the reply has ended: a number it ended on alone."""
        number, self._number = self._number, ""
        return self._said(number) if number else ""

    def _said(self, text: str) -> str:
        for pattern in (_BOLD, _STRIKE):
            text = pattern.sub(lambda m: m[m.lastindex or 0], text)
        text = _EMPHASIS.sub(r"\2", text)
        text = text.replace("**", "").replace("__", "").replace("*", "")
        if self._english:
            text = _symbols_spelled(_THOUSANDS.sub("", text))
            for pattern, said in _ENGLISH:
                text = pattern.sub(said, text)
            for symbol, words in _SYMBOLS.items():
                text = text.replace(symbol, words)
            # Without a number before them.
            text = text.replace("°C", " degrees Celsius").replace("°F", " degrees Fahrenheit")
            text = text.replace("°", " degrees").replace("%", " percent")
        text = "".join(char for char in text if not _pictograph(char))
        text = _SPACE_BEFORE_MARK.sub(r"\1", _SPACES.sub(" ", text))
        text = _SPACE_AFTER_PAREN.sub("(", text).strip()
        return text if any(char.isalnum() for char in text) else ""

    def _outside_code(self, clause: str) -> str:
        """The parts of `clause` outside fenced code, tracking fences across clauses."""
        kept = []
        for index, part in enumerate(clause.split(FENCE)):
            if index:
                self._in_code = not self._in_code
            if not self._in_code:
                kept.append(part)
        return " ".join(kept)


def said_length(text: str, language: str = "") -> int:
    """How many characters the voice says for `text` taken alone: with no code block
    open before it, and remembering none after it, however often it is asked."""
    return len(SpokenForm(language)(text))
