"""What the agent works out rather than recalls: a sum, a unit conversion or a day of the
week asked for in the caller's words, handed to the LLM as a note after the question.

A small model knows its facts better than its figures: Qwen2.5-Coder-0.5B says ten miles
are "10,000 kilometers", three days "21 hours", and today is "[insert date]". Given the
figure worked out, it says it in its own words. Only English is read; a question with nothing
to work out gets no note, and the note is never kept in the conversation.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from dataclasses import dataclass

from app.agent.spoken_form import SCALE_VALUES, WORD_VALUES
from app.vocab.chat import ChatMessage
from app.vocab.languages import ENGLISH


def _numbers(words: list[str]) -> list[str]:
    """`words` with each run of number words as one number ("one hundred and twenty" ->
    "120"; "a hundred" -> "100"; "a dozen" -> "12")."""
    out: list[str] = []
    i = 0
    while i < len(words):
        word = words[i]
        ahead = words[i + 1] if i + 1 < len(words) else ""
        if word in ("a", "an", "one") and ahead == "dozen":
            out.append("12")
            i += 2
            continue
        starts = word in WORD_VALUES or (word == "a" and ahead in SCALE_VALUES)
        if not starts:
            out.append(word)
            i += 1
            continue
        total = current = 0
        while i < len(words):
            word = words[i]
            if word in WORD_VALUES:
                current += WORD_VALUES[word]
            elif word == "a" and current == 0:
                current = 1
            elif word in SCALE_VALUES:
                scale = SCALE_VALUES[word]
                if scale == 100:
                    current = max(current, 1) * 100
                else:
                    total += max(current, 1) * scale
                    current = 0
            elif (
                word == "and"
                and i + 1 < len(words)
                and words[i + 1] in WORD_VALUES
                and (current >= 100 or total)
            ):
                pass
            else:
                break
            i += 1
        value = total + current
        if words[i : i + 3] == ["and", "a", "half"]:
            out.append(f"{value}.5")
            i += 3
        else:
            out.append(str(value))
    return out


def plain(text: str) -> str:
    """`text` lower-cased, its symbols said as words and its numbers as digits, for the
    patterns below: "What's 9 + 6?" -> "what is 9 plus 6"."""
    said = text.lower().replace("\u2019", "'")
    said = re.sub(r"(?<=\d),(?=\d{3}\b)", "", said)  # 1,000
    said = re.sub(r"(?<=\d)\s*([+×*x÷%])\s*(?=\d)", r" \1 ", said)
    for symbol, word in (("+", "plus"), ("×", "times"), ("*", "times"), ("÷", "divided by"),
                         ("%", " percent"), ("°", " degrees ")):  # fmt: skip
        said = said.replace(symbol, f" {word} ")
    said = re.sub(r"(?<=\d) x (?=\d)", " times ", said)
    said = re.sub(r"(?<=\d) - (?=\d)", " minus ", said)
    said = said.replace("what's", "what is").replace("how's", "how is")
    said = re.sub(r"(?<=[a-z])-(?=[a-z])", " ", said)
    said = re.sub(r"\bfourty\b", "forty", said)  # as Qwen2.5-Coder-1.5B wrote 42
    words = re.findall(r"\d+(?:\.\d+)?|[a-z']+", said)
    return " ".join(_numbers(words))


@dataclass(frozen=True, slots=True)
class Unit:
    size: float  # in the dimension's base unit
    one: str
    many: str


def _units() -> dict[tuple[str, str], Unit]:
    """Each unit by (dimension, any of its names)."""
    table: dict[tuple[str, str], Unit] = {}
    rows = (
        # length, in metres
        ("length", 0.001, "millimeter", "millimeters", "millimetre millimetres mm"),
        ("length", 0.01, "centimeter", "centimeters", "centimetre centimetres cm"),
        ("length", 1.0, "meter", "meters", "metre metres"),
        ("length", 1000.0, "kilometer", "kilometers", "kilometre kilometres km kms"),
        ("length", 0.0254, "inch", "inches", ""),
        ("length", 0.3048, "foot", "feet", "ft"),
        ("length", 0.9144, "yard", "yards", "yd yds"),
        ("length", 1609.344, "mile", "miles", ""),
        # mass, in kilograms
        ("mass", 1e-6, "milligram", "milligrams", "mg"),
        ("mass", 0.001, "gram", "grams", "grammes"),
        ("mass", 1.0, "kilogram", "kilograms", "kilo kilos kg kgs"),
        ("mass", 1000.0, "tonne", "tonnes", ""),
        ("mass", 0.028349523125, "ounce", "ounces", "oz"),
        ("mass", 0.45359237, "pound", "pounds", "lb lbs"),
        ("mass", 6.35029318, "stone", "stone", "stones"),
        # time, in seconds; a year is a calendar year
        ("time", 0.001, "millisecond", "milliseconds", ""),
        ("time", 1.0, "second", "seconds", "secs"),
        ("time", 60.0, "minute", "minutes", "mins"),
        ("time", 3600.0, "hour", "hours", "hrs"),
        ("time", 86400.0, "day", "days", ""),
        ("time", 604800.0, "week", "weeks", ""),
        ("time", 1209600.0, "fortnight", "fortnights", ""),
        ("time", 365 * 86400.0, "year", "years", ""),
        ("time", 366 * 86400.0, "leap year", "leap years", ""),
        # years, for what is counted in them
        ("years", 1 / 12, "month", "months", ""),
        ("years", 1.0, "year", "years", ""),
        ("years", 10.0, "decade", "decades", ""),
        ("years", 100.0, "century", "centuries", ""),
        ("years", 1000.0, "millennium", "millennia", ""),
        # volume, in litres; the US measures
        ("volume", 0.001, "milliliter", "milliliters", "millilitre millilitres ml"),
        ("volume", 1.0, "liter", "liters", "litre litres"),
        ("volume", 3.785411784, "gallon", "gallons", ""),
        ("volume", 0.946352946, "quart", "quarts", ""),
        ("volume", 0.473176473, "pint", "pints", ""),
        ("volume", 0.2365882365, "cup", "cups", ""),
        ("volume", 0.01478676478125, "tablespoon", "tablespoons", ""),
        ("volume", 0.00492892159375, "teaspoon", "teaspoons", ""),
    )
    for dimension, size, one, many, others in rows:
        unit = Unit(size, one, many)
        for name in (one, many, *others.split()):
            table[dimension, name] = unit
    return table


UNITS = _units()
# Longest first, so "leap year" is one unit and not a "year".
_UNIT = "|".join(sorted({re.escape(name) for _, name in UNITS}, key=len, reverse=True))
_DIMENSIONS = tuple(dict.fromkeys(dimension for dimension, _ in UNITS))
_NUMBER = r"\d+(?:\.\d+)?"
# Between a figure's parts, no other figure: "5 feet 10 inches in cm" is not 5 feet's.
_NO_FIGURE = r"(?:(?!\d).)*?"
_TEMPERATURE = {"celsius": "C", "centigrade": "C", "fahrenheit": "F", "kelvin": "K"}
DAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_OFFSETS = {"the day after tomorrow": 2, "the day before yesterday": -2,
            "tomorrow": 1, "yesterday": -1, "today": 0}  # fmt: skip
_WHEN = "|".join(_OFFSETS)


def figure(value: float) -> str:
    """A result as a person writes it: whole where it is, else to two decimals."""
    if math.isclose(value, round(value), abs_tol=1e-9):
        return f"{round(value):,}"
    return f"{value:,.2f}".rstrip("0").rstrip(".")


def _both(one: str, two: str) -> tuple[Unit, Unit] | None:
    """Units `one` and `two` of one dimension ("year" is in two: days, and decades)."""
    for dimension in _DIMENSIONS:
        a, b = UNITS.get((dimension, one)), UNITS.get((dimension, two))
        if a and b:
            return a, b
    return None


def _converted(amount: float, source: str, target: str) -> str | None:
    units = _both(source, target)
    if units is None or units[0] == units[1]:
        return None
    a, b = units
    value = amount * a.size / b.size
    return (f"{figure(amount)} {a.one if amount == 1 else a.many} = "
            f"{figure(value)} {b.one if value == 1 else b.many}")  # fmt: skip


def _temperature(amount: float, source: str, target: str) -> str | None:
    a, b = _TEMPERATURE[source], _TEMPERATURE[target]
    if a == b:
        return None
    celsius = {"C": amount, "F": (amount - 32) * 5 / 9, "K": amount - 273.15}[a]
    value = {"C": celsius, "F": celsius * 9 / 5 + 32, "K": celsius + 273.15}[b]
    return f"{figure(amount)} degrees {source.title()} = {figure(value)} degrees {target.title()}"


# Word problems: "I have 20 dollars and spend 7, how much is left?", "split a 96 dollar
# bill 4 ways". Both Qwen models answered the first wrong ("$2 - $7 = -$5", "fifteen").
_TAKEN = (
    r"spend|spent|eat|ate|lose|lost|give away|gave away|give|gave|use|used|sell|sold|"
    r"drink|drank|break|broke|take away|took away|pay|paid"
)
_WHO = r"(?: i| you| we| he| she| they)?"
_LEFT = re.compile(r"\b(?:left|remain|remains|remaining|left over)\b")
_SPLIT = r"\b(?:split|share|divide)s? (?:up )?(?:a |an |the )?"
_SAME = {"multiplied by": "times", "over": "divided by"}
_OPERATOR = r"plus|minus|times|multiplied by|divided by|over"
_PARTS = {"half": 2, "a half": 2, "a third": 3, "a quarter": 4, "a fifth": 5, "a tenth": 10}


def _calculated(numbers: list[float], operators: list[str]) -> float | None:
    """`numbers` joined by `operators`, times and divided by first."""
    values = [numbers[0]]
    for operator, number in zip(operators, numbers[1:], strict=True):
        if operator == "times":
            values[-1] *= number
        elif operator == "divided by":
            if number == 0:
                return None
            values[-1] /= number
        else:
            values.append(number if operator == "plus" else -number)
    return sum(values)


def _arithmetic(said: str) -> str | None:
    n = _NUMBER
    if m := re.search(rf"\b({n}) percent of ({n})\b", said):
        a, b = float(m[1]), float(m[2])
        return f"{figure(a)} percent of {figure(b)} = {figure(a * b / 100)}"
    if m := re.search(rf"\b{n}(?: (?:{_OPERATOR}) {n})+\b", said):
        parts = re.findall(rf"{n}|{_OPERATOR}", m[0])
        numbers = [float(part) for part in parts[::2]]
        operators = [_SAME.get(part, part) for part in parts[1::2]]
        value = _calculated(numbers, operators)
        return None if value is None else f"{' '.join(parts)} = {figure(value)}"
    if m := re.search(rf"\badd (?:up |together )?((?:{n}(?:,| and| plus)? )+(?:and )?{n})\b", said):
        numbers = [float(part) for part in re.findall(n, m[1])]
        return f"{' plus '.join(map(figure, numbers))} = {figure(sum(numbers))}"
    if m := re.search(rf"\bsubtract ({n}) from ({n})\b", said):
        a, b = float(m[1]), float(m[2])
        return f"{figure(b)} minus {figure(a)} = {figure(b - a)}"
    fractions = "|".join(_PARTS)
    if m := re.search(rf"\b({fractions}) of (?:a )?({n})\b", said):
        return f"{m[1]} of {figure(float(m[2]))} = {figure(float(m[2]) / _PARTS[m[1]])}"
    if m := re.search(rf"\bsquare root of ({n})\b", said):
        return f"the square root of {figure(float(m[1]))} = {figure(math.sqrt(float(m[1])))}"
    if m := re.search(rf"\b({n}) (squared|cubed)\b", said):
        power = 2 if m[2] == "squared" else 3
        return f"{figure(float(m[1]))} {m[2]} = {figure(float(m[1]) ** power)}"
    if m := re.search(rf"\b(?:double|twice) ({n})\b", said):
        return f"twice {figure(float(m[1]))} = {figure(2 * float(m[1]))}"
    return _word_problem(said)


def _word_problem(said: str) -> str | None:
    n, between = _NUMBER, _NO_FIGURE
    if _LEFT.search(said) and (
        m := re.search(
            rf"\b(?:have|had|has|got) ({n})\b{between}\b(?:and|then|but)(?: then)?{_WHO} "
            rf"(?:{_TAKEN}) ({n})\b",
            said,
        )
    ):
        a, b = float(m[1]), float(m[2])
        return f"{figure(a)} minus {figure(b)} = {figure(a - b)}" if b <= a else None
    if m := re.search(
        rf"{_SPLIT}({n})\b{between}\b(?:({n}) ways|(?:between|among|by|into) ({n}))\b", said
    ):
        a, b = float(m[1]), float(m[2] or m[3])
        return f"{figure(a)} split {figure(b)} ways = {figure(a / b)} each" if b else None
    return None


def _conversion(said: str) -> str | None:
    n, u, between = _NUMBER, _UNIT, _NO_FIGURE
    temperatures = "|".join(_TEMPERATURE)
    if m := re.search(
        rf"\b({n}) (?:degrees? )?({temperatures})\b{between}\b({temperatures})\b", said
    ):
        return _temperature(float(m[1]), m[2], m[3])
    into = r"in|per|to|make"
    if m := re.search(
        rf"\bhow many ({u})\b{between}\b(?:{into}) (?:(a|an|one|{n}) )?({u})\b", said
    ):
        amount = float(m[2]) if m[2] and m[2][0].isdigit() else 1.0
        return _converted(amount, m[3], m[1])
    into = r"in|to|into|as|is how many|are how many"
    if m := re.search(rf"\b({n}) ({u})\b{between}\b(?:{into}) ({u})\b", said):
        if re.search(rf"\b(?:{u}) $", said[: m.start()]):
            return None  # "5 feet 10 inches": a measure in two units is not worked out
        return _converted(float(m[1]), m[2], m[3])
    if m := re.search(rf"\bhow many ({u}) (?:is|are) ({n}) ({u})\b", said):
        return _converted(float(m[2]), m[3], m[1])
    return None


def _shift(said: str) -> int | None:
    """Days on from the day given: "in 10 days", "3 days before", "a week later"."""
    n = _NUMBER
    if m := re.search(rf"\bin ({n}|a) (days?|weeks?)\b", said):
        sign = 1
    elif m := re.search(rf"\b({n}|a) (days?|weeks?) (after|from|later|on|before|ago|earlier)\b",
                        said):  # fmt: skip
        sign = -1 if m[3] in ("before", "ago", "earlier") else 1
    else:
        return None
    count = 1.0 if m[1] == "a" else float(m[1])
    if count != int(count):
        return None
    return sign * int(count) * (7 if m[2].startswith("week") else 1)


def _weekday(said: str, today: dt.date) -> str | None:
    days = "|".join(DAYS)
    # "my birthdays on a Monday": Whisper's "birthday's"
    verb = r"'s| is| was| will be| falls|s(?= on)"
    if m := re.search(rf"\bif (.+?)(?:{verb})(?: on)?(?: a)? ({days})\b", said):
        known, day = m[1], DAYS.index(m[2])
        given = _OFFSETS.get(known)
        rest = said[m.end() :]
        shift, asked = _shift(rest), re.search(rf"\b({_WHEN})\b", rest)
        if shift is not None:
            wanted, told = shift, f"{abs(shift)} days {'after' if shift > 0 else 'before'}"
        elif asked and given is not None and asked[1] != known:
            wanted, told = _OFFSETS[asked[1]] - given, asked[1]
        elif given and asked is None:
            wanted, told = -given, "today"
        else:
            return None
        answer = DAYS[(day + wanted) % 7].title()
        return f"if {known} is a {m[2].title()}, {told} is a {answer}"
    if m := re.search(
        rf"\b(?:what|which) (?:day|date|day of (?:the|a) week) "
        rf"(?:is it|was it|will it be|is|was|will be)"
        rf"(?: ({_WHEN}))?(?: it)?$|\bwhat is (?:the date|({_WHEN})'s date)(?: ({_WHEN}))?$",
        said,
    ):
        when = m[1] or m[2] or m[3] or "today"
        date = today + dt.timedelta(days=_OFFSETS[when])
        return f"{when} is {date:%A, %B} {date.day}, {date.year}"
    return None


# "that" or "it" where a figure goes: "And what's that divided by two?", "half of it".
_THAT = re.compile(
    rf"\b(?:that|it)\b(?= (?:{_OPERATOR}|squared|cubed)\b)|(?<=\bof )(?:that|it)\b|"
    r"(?<=\bdouble )(?:that|it)\b"
)


def worked_out(text: str, today: dt.date | None = None, before: str = "") -> str | None:
    """The figure `text` asks for, worked out ("10 miles = 16.09 kilometers"), or None.
    `before`: the reply it follows, whose last figure is what "that" stands for."""
    said = plain(text)
    if before and (figures := re.findall(_NUMBER, plain(before))):
        said = _THAT.sub(figures[-1], said)
    return _weekday(said, today or dt.date.today()) or _conversion(said) or _arithmetic(said)


NOTE = "(Worked out for you, to say in words: {}.)"


def with_workings(prompt: list[ChatMessage], language: str) -> list[ChatMessage]:
    """`prompt` with a note after the user's last words where they ask for a figure
    that can be worked out. In the user's message, which any chat template takes (some
    refuse a system message after the first); the conversation itself keeps no note."""
    if (language or ENGLISH) != ENGLISH or not prompt or prompt[-1]["role"] != "user":
        return prompt
    asked = prompt[-1]["content"] or ""
    replied = len(prompt) > 1 and prompt[-2]["role"] == "assistant"
    found = worked_out(asked, before=(prompt[-2]["content"] or "") if replied else "")
    if found is None:
        return prompt
    return [*prompt[:-1], {**prompt[-1], "content": f"{asked}\n\n{NOTE.format(found)}"}]
