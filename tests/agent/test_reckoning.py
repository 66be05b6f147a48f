"""The agent works out the figures a caller asks for (app/agent/reckoning.py), and
leaves every other question alone."""

from __future__ import annotations

import datetime as dt

import pytest

from app.agent.reckoning import plain, with_workings, worked_out
from app.vocab.chat import ChatMessage

SUNDAY = dt.date(2026, 12, 6)


@pytest.mark.parametrize(
    ("said", "written"),
    [
        ("What's nine + six?", "what is 9 plus 6"),
        ("How much is a hundred minus thirty-five?", "how much is 100 minus 35"),
        ("one hundred and twenty degrees", "120 degrees"),
        ("two thousand three hundred and four", "2304"),
        ("What is 1,250 x 3?", "what is 1250 times 3"),
        ("a dozen eggs and a half", "12 eggs and a half"),
    ],
)
def test_words_become_figures(said: str, written: str) -> None:
    assert plain(said) == written


@pytest.mark.parametrize(
    ("question", "answer"),
    [
        ("What is twelve divided by four?", "12 divided by 4 = 3"),
        ("What's twenty percent of eighty?", "20 percent of 80 = 16"),
        ("What is half of fifty?", "half of 50 = 25"),
        ("What is the square root of eighty-one?", "the square root of 81 = 9"),
        ("What is 10 - 3?", "10 minus 3 = 7"),
        ("About how many kilometers are in ten miles?", "10 miles = 16.09 kilometers"),
        ("How many feet are in a yard?", "1 yard = 3 feet"),
        ("How many days are in a leap year?", "1 leap year = 366 days"),
        ("How many years are in a century?", "1 century = 100 years"),
        ("Convert 5 km to miles.", "5 kilometers = 3.11 miles"),
        ("About how many pounds is five kilograms?", "5 kilograms = 11.02 pounds"),
        ("What is thirty degrees Celsius in Fahrenheit?",
         "30 degrees Celsius = 86 degrees Fahrenheit"),
        ("If yesterday was Friday, what day is today?",
         "if yesterday is a Friday, today is a Saturday"),
        ("If today is Sunday, what day is the day after tomorrow?",
         "if today is a Sunday, the day after tomorrow is a Tuesday"),
        ("If my birthday's on a Monday, what day was three days before?",
         "if my birthday is a Monday, 3 days before is a Friday"),
        ("What is two plus three times four?", "2 plus 3 times 4 = 14"),
        ("Add up 45, 38 and 17.", "45 plus 38 plus 17 = 100"),
        ("How many minutes are in three and a half hours?", "3.5 hours = 210 minutes"),
        ("What day of the week is it today?", "today is Sunday, December 6, 2026"),
        # As Whisper wrote them from a caller's voice.
        ("What day of a week is it today?", "today is Sunday, December 6, 2026"),
        ("If my birthdays on a Monday, what day was three days before that?",
         "if my birthday is a Monday, 3 days before is a Friday"),
        ("What's the date tomorrow?", "tomorrow is Monday, December 7, 2026"),
        ("I have three apples and eat one. How many are left?", "3 minus 1 = 2"),
        ("If I have twenty dollars and spend seven, how much do I have left?",
         "20 minus 7 = 13"),
        ("If we split a ninety six dollar bill four ways how much does everybody pay?",
         "96 split 4 ways = 24 each"),
        ("Share thirty sweets between six children: how many each?", "30 split 6 ways = 5 each"),
    ],
)  # fmt: skip
def test_a_figure_asked_for_is_worked_out(question: str, answer: str) -> None:
    assert worked_out(question, SUNDAY) == answer


@pytest.mark.parametrize(
    "question",
    [
        "What is the capital of France?",
        "How many legs does a spider have?",
        "I have three apples and eat one. How many did I have?",
        "I had two cats and lost one last year.",  # nothing asked to be left
        "Split the bill four ways.",  # no amount
        "Which is heavier, a kilogram of iron or a gram of feathers?",
        "What is the boiling point of water in Celsius?",
        "What day is Christmas?",
        "Set an alarm for seven tomorrow morning.",
        "Book me a table for two tonight.",
        "What is ten divided by zero?",
        "How many meters are in a meter?",
        "I'm 5 feet 10 inches, what is that in centimeters?",
        "What day of the week is 12/25?",
    ],
)
def test_nothing_to_work_out_is_left_alone(question: str) -> None:
    assert worked_out(question, SUNDAY) is None


@pytest.mark.parametrize(
    ("question", "before", "answer"),
    [
        ("And what's that divided by two?", "Six times seven is forty-two.",
         "42 divided by 2 = 21"),
        ("What is half of that?", "That comes to 120 dollars.", "half of 120 = 60"),
        ("Double it.", "You have thirteen dollars left.", "twice 13 = 26"),
        ("And that divided by two?", "Fourty-two.", "42 divided by 2 = 21"),  # misspelt
        ("And that times three?", "It's a nice day.", None),  # no figure to stand for
        ("Is that right?", "Six times seven is forty-two.", None),  # nothing to work out
    ],
)  # fmt: skip
def test_that_stands_for_the_figure_said_before(
    question: str, before: str, answer: str | None
) -> None:
    assert worked_out(question, SUNDAY, before=before) == answer


def test_the_note_goes_to_the_llm_with_the_question_and_nowhere_else() -> None:
    prompt: list[ChatMessage] = [
        {"role": "system", "content": "You are Vera."},
        {"role": "user", "content": "How many minutes are in two hours?"},
    ]
    told = with_workings(prompt, "en")
    assert told[:-1] == prompt[:-1]
    assert told[-1]["role"] == "user"
    assert told[-1]["content"].startswith("How many minutes are in two hours?")
    assert "2 hours = 120 minutes" in told[-1]["content"]
    assert prompt[-1]["content"] == "How many minutes are in two hours?"  # history untouched
    assert with_workings(prompt, "es") == prompt
    asked_before = [*prompt, {"role": "assistant", "content": "There are 120."}]
    assert with_workings(asked_before, "en") == asked_before
    followed = [*asked_before, {"role": "user", "content": "And half of that?"}]
    assert "half of 120 = 60" in with_workings(followed, "en")[-1]["content"]
