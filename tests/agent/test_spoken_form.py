"""What the voice says of an LLM's text (app/agent/spoken_form.py): the forms a small model
writes for a screen, each as a person would say it."""

from __future__ import annotations

import numpy as np
import pytest

from app.agent.responders import AgentResponder, Piece, SpeechRequest
from app.agent.spoken_form import (
    SpokenForm,
    number_words,
    ordinal_words,
    said_length,
    year_words,
)
from app.agent.timings import TurnTimings
from app.config import TtsSettings
from app.engines import Engines
from app.engines.tts import KokoroTTS
from tests.session.fakes import FakeLLM, FakeSTT
from tests.support.speech import transcribe, words


@pytest.mark.parametrize(
    ("written", "said"),
    [
        ("Ten miles is about 16.1 km.", "Ten miles is about sixteen point one kilometres."),
        ("It costs $5.50, or £1.", "It costs five dollars and fifty cents, or one pound."),
        ("A $3 million house.", "A three million dollars house."),
        ("It's 25°C, about 77°F.",
         "It's twenty-five degrees Celsius, about seventy-seven degrees Fahrenheit."),
        ("Meet me at 3:30 pm, or 10:00.", "Meet me at three thirty p m, or ten o'clock."),
        ("At 9:05 am.", "At nine oh five a m."),
        ("The 21st century began in 2001.",
         "The twenty-first century began in two thousand and one."),
        ("In 1990, prices rose 12%.", "In nineteen ninety, prices rose twelve percent."),
        ("The 1990s were fun.", "The nineteen nineties were fun."),
        ("It weighs 1 kg, not 2,500 lbs.",
         "It weighs one kilogram, not two thousand five hundred pounds."),
        ("About 5-10 minutes.", "About five to ten minutes."),
        ("Add 1/2 a cup.", "Add one half a cup."),
        ("It's -5 degrees.", "It's minus five degrees."),
        ("2 + 2 = 4", "two plus two equals four"),
        ("Salt & pepper", "Salt and pepper"),
        ("100 mph is 160 km/h.",
         "one hundred miles per hour is one hundred and sixty kilometres per hour."),
        ("A spider has 8 legs 🕷️!", "A spider has eight legs!"),
        ("Qwen 2.5 Coder 0.5B, or a 7B model in 4K.",
         "Qwen two point five Coder zero point five billion, or a seven billion model in four K."),
        ("I run the Qwen 2.5 Coder 1.5 B model.",  # as the instructions name it
         "I run the Qwen two point five Coder one point five billion model."),
        ("I run the Qwen2.5-Coder-1.5B model.",
         "I run the Qwen two point five Coder one point five billion model."),
        ("Seat 3B, or GPT-4 in 2.5M homes.",
         "Seat three B, or GPT four in two point five million homes."),
        ("COVID-19 and a 3-year-old.", "COVID nineteen and a three year-old."),
        ("Say word0 after Llama3.", "Say word0 after Llama three."),
        ("Version 2.5.1 is out.", "Version 2.5.1 is out."),
        ("Great job 👍🏽", "Great job"),
        ("Can't stop? You can’t park here.", "Cannot stop? You cannot park here."),
        ("The chemical symbol for gold is Au.", "The chemical symbol for gold is A-U."),
        ("Its symbol is Fe, from ferrum.", "Its symbol is F-E, from ferrum."),
        ("He is the symbol for helium.", "He is the symbol for helium."),
        ("The symbol for helium is He.", "The symbol for helium is H-E."),
        ("Na Li went home.", "Na Li went home."),  # no symbol spoken of: names stay
        ("Au.", "A-U."),  # Qwen2.5-Coder-1.5B's whole answer to gold's symbol
        ("No.", "No."),
    ],
)  # fmt: skip
def test_numbers_units_and_symbols_are_said_in_words(written: str, said: str) -> None:
    assert SpokenForm()(written) == said


@pytest.mark.parametrize(
    ("written", "said"),
    [
        ("**Paris** is the *capital*.", "Paris is the capital."),
        ("See [the map](https://example.com/map).", "See the map."),
        ("![a cat](cat.png) Cute.", "a cat Cute."),
        ("Visit https://www.bbc.co.uk/news today.", "Visit bbc.co.uk today."),
        ("Run `ls` now.", "Run ls now."),
        ("## Steps", "Steps"),
        ("- Preheat the oven.", "Preheat the oven."),
        ("> Be kind.", "Be kind."),
        ("~~old~~ new", "old new"),
        ("Use <b>this</b>.", "Use this."),
        ("snake_case stays", "snake_case stays"),
        ("| Day | Temperature (°C) |", "Day, Temperature (degrees Celsius)."),
        ("|-----|:----:|", ""),
        ("| Monday | 75°C |", "Monday, seventy-five degrees Celsius."),
        ("1.", ""),
        ("---", ""),
        ("🙂", ""),
    ],
)  # fmt: skip
def test_markup_is_not_read(written: str, said: str) -> None:
    assert SpokenForm()(written) == said


def test_a_code_block_is_not_read_across_clauses() -> None:
    said = SpokenForm()
    clauses = ["Here it is: ```python", "print('hi')", "x = 1", "``` Run it.", "Done."]
    assert [said(clause) for clause in clauses] == ["Here it is:", "", "", "Run it.", "Done."]


def test_a_length_is_the_same_however_often_it_is_asked() -> None:
    """The chunker measures a growing piece again and again: an open code block in it
    must not flip a remembered state at each call, as one reply's SpokenForm does."""
    text = "Run this: ```print(1) and then a very long line of code here"
    assert said_length(text) == said_length(text) == len("Run this:")
    one_reply = SpokenForm()
    assert len(one_reply(text)) != len(one_reply(text))


def test_another_language_keeps_its_numbers_for_its_own_reader() -> None:
    """espeak-ng reads digits in the voice's language; markup and emoji go all the same."""
    assert SpokenForm("fr")("Il fait **25°C** 😀, voir https://meteo.fr/x") == (
        "Il fait 25°C, voir meteo.fr"
    )


def test_number_words() -> None:
    assert number_words(0) == "zero"
    assert number_words(42) == "forty-two"
    assert number_words(100) == "one hundred"
    assert number_words(1005) == "one thousand and five"
    assert number_words(1_234_567) == (
        "one million two hundred and thirty-four thousand five hundred and sixty-seven"
    )
    assert [ordinal_words(n) for n in (1, 2, 3, 12, 20, 21, 100)] == [
        "first", "second", "third", "twelfth", "twentieth", "twenty-first", "one hundredth",
    ]  # fmt: skip
    assert [year_words(y) for y in (1815, 1900, 1905, 2000, 2005, 2024)] == [
        "eighteen fifteen", "nineteen hundred", "nineteen oh five", "two thousand",
        "two thousand and five", "twenty twenty-four",
    ]  # fmt: skip


async def test_the_voice_and_the_transcript_say_the_spoken_form(whisper: object) -> None:
    """Through the responder and the real voice: what a model wrote for a screen is said
    in words, and the transcript is what was said. Read as written, the same reply is
    heard as "See asterisk asterisk, HTTPS, slash..." and its emoji as "person walking",
    and gold's symbol "Au" as "all".
    (The LLM is a script: what it writes is this test's input.)"""
    llm = FakeLLM()
    llm.answer = "See **https://example.com/walks** for 3 walks 🚶."
    tts = KokoroTTS(TtsSettings())
    responder = AgentResponder(Engines(stt=FakeSTT(), llm=llm, tts=tts))
    request = SpeechRequest(
        "sess_spoken", [{"role": "user", "content": "Any walks nearby?"}], b"",
        TtsSettings().voice, 1.0, TurnTimings(),
    )  # fmt: skip
    try:
        pieces = [piece async for piece in responder.speak(request)]
        as_written = await tts.synthesize(llm.answer)
        llm.answer = "12."  # the whole reply: an answer, not a list's marker
        number = [piece async for piece in responder.speak(request)]
        llm.answer = "The chemical symbol for gold is Au."  # read as written: "...is all."
        gold = [piece async for piece in responder.speak(request)]
        llm.answer = "Mice"  # the 1.5B's whole answer; said without a full stop: "Nice"
        mice = [piece async for piece in responder.speak(request)]
    finally:
        tts.close()

    def heard(samples: np.ndarray) -> set[str]:
        pcm = (np.clip(samples, -1, 1) * 32767).astype(np.int16)
        return set(words(transcribe(whisper, pcm, 24_000)))

    spoken = [piece for piece in pieces if isinstance(piece, Piece)]
    said_text = " ".join(piece.text for piece in spoken if piece.text)
    assert said_text == "See example.com for three walks."
    read_out = {"asterisk", "https", "http", "slash", "person", "walking"}
    assert read_out & heard(as_written.samples), "the voice reads markup as written"
    said = heard(np.concatenate([piece.speech.samples for piece in spoken]))
    assert "example" in said and not read_out & said, said
    assert [p.text for p in number if isinstance(p, Piece) and p.text] == ["twelve."]
    gold_said = heard(np.concatenate([p.speech.samples for p in gold if isinstance(p, Piece)]))
    assert {"gold", "au"} <= gold_said, gold_said
    assert [p.text for p in mice if isinstance(p, Piece) and p.text] == ["Mice."]
    mice_said = heard(np.concatenate([p.speech.samples for p in mice if isinstance(p, Piece)]))
    assert mice_said == {"mice"}, mice_said


def test_a_reply_of_one_piece_ends_on_a_full_stop() -> None:
    """Where the model left none (a bare "Mice", as the voice says it, is heard as another
    word); a mark already there, another language, or a longer reply's end is kept."""
    assert SpokenForm("en").last("Mice") == "Mice."
    assert SpokenForm("en").last("It is 18") == "It is eighteen."
    assert SpokenForm("en").last("Paris!") == "Paris!"
    assert SpokenForm("en").last('you say "Merci"') == 'you say "Merci"'
    assert SpokenForm("fr").last("Merci") == "Merci"
    longer = SpokenForm("en")
    assert [longer("We're currently in week twelve."), longer.last("We're")] == [
        "We're currently in week twelve.", "We're",
    ]  # fmt: skip


def test_a_reply_that_is_only_a_number_is_said_and_a_list_marker_is_not() -> None:
    """Asked "What is 15% of 80?", the 0.5B answered "12.", which was taken for a list's
    marker and dropped: the caller heard nothing at all."""
    answer = SpokenForm("en")
    assert answer("12.") == ""
    assert answer.end() == "twelve."
    listed = SpokenForm("en")
    said = [listed(clause) for clause in ("1.", "Gather the eggs.", "2.", "Whisk them.")]
    assert said == ["", "Gather the eggs.", "", "Whisk them."]
    assert listed.end() == ""
