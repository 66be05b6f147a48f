"""Which embedded LLM answers a caller right: 186 voice-assistant questions asked of each
GGUF, through the server's own llama.cpp engine and reply guard, as the agent asks them.

    python -m bench.answers                                # the bundled models found here
    python -m bench.answers --gguf a.gguf b.gguf --runs 1  # any files
    python -m bench.answers --show-wrong                   # and what each got wrong

Each question has the words a right answer says (any one of a group, every group) and
words it never says (a claim to be someone else's, or to have done what it cannot);
facts, small talk, one-step reasoning, unit conversions, how-tos, who it is, requests a
voice agent cannot do (it should say so), follow-ups that need the turn before, and tool
calls (the tool and its argument must be right). The questions come in parts (--half):
tuned on; held out while the 0.5B's prompt was chosen; blind (sums and conversions
written by a helper who had not seen the project); fresh (40 written so, run once per
candidate, after the held-out half had been read for the 1.5B's prompt); unseen (40 more
written so once the fresh ones had been read, to check the choice of default). It prints, per
model: right answers per kind and per part, the first token's time (p50/p95, from the
request, the prompt included), tokens/s after it, and how often the reply guard cut a
reply. It asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import datetime as dt
import json
import os
import re
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

from app.agent.reckoning import with_workings
from app.agent.reply_rules import reply_rules
from app.agent.spoken_form import ordinal_words
from app.config import LlmSettings
from app.engines.llama import LlamaCppLLM
from app.engines.llm_models import installed
from app.vocab.chat import ChatMessage, TokenCount, Tool, ToolCallDelta
from app.vocab.languages import ENGLISH
from app.vocab.persona import filled
from bench import machine

CANNOT = ("can't", "cannot", "unable", "not able", "don't have", "do not have", "no access",
          "not possible", "sorry", "i'm not", "i am not")  # fmt: skip

LIGHTS: Tool = {
    "type": "function",
    "function": {
        "name": "set_lights",
        "description": "Turn the lights in a room on or off.",
        "parameters": {
            "type": "object",
            "properties": {"room": {"type": "string"}, "on": {"type": "boolean"}},
            "required": ["room", "on"],
        },
    },
}
WEATHER: Tool = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Today's weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}


@dataclass(frozen=True, slots=True)
class Question:
    kind: str
    text: str
    # Every group must be heard, any one word of a group; for a tool call: the tool's
    # name, then words its arguments must hold.
    expect: tuple[tuple[str, ...], ...]
    tools: tuple[Tool, ...] = ()
    before: tuple[tuple[str, str], ...] = ()  # earlier turns: (the user's, the agent's)
    avoid: tuple[str, ...] = ()  # what a right answer never says (regular expressions)
    # "tuned": looked at while choosing the model and prompt; "held out": not; "blind":
    # written by someone who had not seen the agent's code either.
    part: str = "tuned"


def q(
    kind: str,
    text: str,
    *groups: str | tuple[str, ...],
    tools: tuple[Tool, ...] = (),
    before: tuple[tuple[str, str], ...] = (),
    avoid: tuple[str, ...] = (),
) -> Question:
    expect = tuple((g,) if isinstance(g, str) else g for g in groups)
    return Question(kind, text, expect, tools, before, avoid)


def held_out(*questions: Question, part: str = "held out") -> list[Question]:
    return [dataclasses.replace(question, part=part) for question in questions]


def forms(answers: str) -> tuple[str, ...]:
    """ "16|sixteen" -> any one of these."""
    return tuple(answers.split("|"))


PARTS = ("tuned", "held out", "blind", "fresh", "unseen")
HALVES = (*(part.replace(" ", "-") for part in PARTS), "both")  # --half: a part, or all


def chosen(part: str, kind: str | None = None) -> list[Question]:
    """The questions of `part` ("both": every one), and of `kind` where given."""
    wanted = PARTS if part == "both" else (part.replace("-", " "),)
    return [q for q in QUESTIONS if q.part in wanted and kind in (None, q.kind)]


def parts_line(judged: list[tuple[Question, bool]]) -> str:
    """Right answers in each part asked: "tuned: 37/42, held out: 29/40"."""
    return ", ".join(
        f"{part}: {sum(ok for q, ok in judged if q.part == part)}"
        f"/{sum(q.part == part for q, _ in judged)}"
        for part in PARTS
        if any(q.part == part for q, _ in judged)
    )


BOTH = (LIGHTS, WEATHER)
# Claims a voice agent without a tool for them must never make.
PRETENDS = ("i'll book", "i've booked", "booked", "i'll order", "i've ordered",
            "i'll call", "i've set", "i'll set", "i'll send", "i've sent", "sure, i'll",
            r"sure, i can(?!'t| ?not)", r"yes, i can(?!'t| ?not)")  # fmt: skip
NOT_MINE = ("openai", "chatgpt", "gpt-", "google", "anthropic", "microsoft")

# The real day, for the questions that ask it: by the clock the server and bench share.
_TODAY = dt.date.today()
TODAY_WEEKDAY = _TODAY.strftime("%A").lower()
_SUFFIX = (
    "th" if _TODAY.day in (11, 12, 13) else {1: "st", 2: "nd", 3: "rd"}.get(_TODAY.day % 10, "th")
)
TODAY_DATE = (
    _TODAY.strftime("%B").lower(),
    (str(_TODAY.day), f"{_TODAY.day}{_SUFFIX}", ordinal_words(_TODAY.day)),
)

# The first half is the one prompts and models were tuned on (the first 32 are
# bench.answers' original set); the second is held out.
QUESTIONS = [
    q("fact", "What is the capital of France?", "paris"),
    q("fact", "What is the capital of Japan?", "tokyo"),
    q("fact", "How many days are in a week?", ("seven", "7")),
    q("fact", "How many legs does a spider have?", ("eight", "8")),
    q("fact", "What color is the sky on a clear day?", "blue"),
    q("fact", "Which planet do we live on?", "earth"),
    q("fact", "What do bees make?", "honey"),
    q("fact", "What is frozen water called?", "ice"),
    q("fact", "Who wrote Romeo and Juliet?", "shakespeare"),
    q("fact", "What is the largest ocean on Earth?", "pacific"),
    q("small talk", "Hi there, how are you today?", ("good", "well", "fine", "great", "doing")),
    q("small talk", "Thank you so much for your help!", ("welcome", "pleasure", "glad", "happy")),
    q("small talk", "Tell me a short joke.", ("why", "what", "because", "knock")),
    q("small talk", "Good morning!", ("morning", "hello", "hi", "help")),
    q("reasoning", "What is two plus two?", ("four", "4")),
    q("reasoning", "What is ten minus three?", ("seven", "7")),
    q("reasoning", "What is five times three?", ("fifteen", "15")),
    q("reasoning", "If today is Monday, what day is tomorrow?", "tuesday"),
    q("reasoning", "Which is heavier, a kilogram of iron or a gram of feathers?", "iron"),
    q("reasoning", "I have three apples and eat one. How many are left?", ("two", "2")),
    q("conversion", "How many minutes are in an hour?", ("sixty", "60")),
    q("conversion", "How many centimeters are in a meter?", ("hundred", "100")),
    q("conversion", "How many hours are in a day?", ("twenty-four", "twenty four", "24")),
    q("conversion", "How many grams are in a kilogram?", ("thousand", "1000", "1,000")),
    q("conversion", "How many seconds are in a minute?", ("sixty", "60")),
    q("cannot", "Please make me a cup of coffee.", CANNOT, avoid=PRETENDS),
    q("cannot", "Can you water the plants in my garden?", CANNOT, avoid=PRETENDS),
    q("cannot", "Drive me to the airport, please.", CANNOT, avoid=PRETENDS),
    q("tool", "Please turn on the lights in the kitchen.", "set_lights", "kitchen", tools=BOTH),
    q("tool", "Switch off the bedroom lights.", "set_lights", "bedroom", tools=BOTH),
    q("tool", "What's the weather like in Berlin today?", "get_weather", "berlin", tools=BOTH),
    q("tool", "Is it raining in London?", "get_weather", "london", tools=BOTH),
    q("fact", "What is the boiling point of water in Celsius?", ("hundred", "100")),
    q("fact", "What gas do plants breathe in?", ("carbon dioxide", "co2")),
    q("how-to", "How do I boil an egg?", "water", ("minutes", "minute")),
    q("how-to", "How do I make a cup of tea?", "water", ("tea bag", "teabag", "leaves", "steep")),
    q("identity", "Who are you?", ("assistant", "vera"), avoid=NOT_MINE),
    q("identity", "What can you do?", ("answer", "questions", "help", "talk", "chat"),
      avoid=("can't do that", "cannot do that")),
    q("identity", "Who made you?", ("qwen", "alibaba", "vera", "voice agent"), avoid=NOT_MINE),
    q("follow-up", "And what about Germany?", "berlin",
      before=(("What is the capital of France?", "The capital of France is Paris."),)),
    q("follow-up", "And a bird?", ("two", "2"),
      before=(("How many legs does a dog have?", "A dog has four legs."),)),
    q("follow-up", "What was the number I just told you?", ("seven", "7"),
      before=(("My lucky number is seven.", "Seven is a nice number!"),)),
    *held_out(
        q("fact", "What is the capital of Italy?", "rome"),
        q("fact", "What is the capital of Canada?", "ottawa"),
        q("fact", "How many continents are there?", ("seven", "7")),
        q("fact", "What animal is known as the king of the jungle?", "lion"),
        q("fact", "How many legs does a dog have?", ("four", "4")),
        q("fact", "What color do you get when you mix blue and yellow?", "green"),
        q("fact", "What is the tallest mountain in the world?", "everest"),
        q("fact", "Who painted the Mona Lisa?", ("leonardo", "da vinci")),
        q("fact", "How many months are in a year?", ("twelve", "12")),
        q("fact", "What is the largest planet in our solar system?", "jupiter"),
        q("fact", "What language do people speak in Brazil?", "portuguese"),
        q("fact", "What is the opposite of hot?", "cold"),
        q("reasoning", "What is nine plus six?", ("fifteen", "15")),
        q("reasoning", "What is twelve divided by four?", ("three", "3")),
        q("reasoning", "What is half of fifty?", ("twenty-five", "twenty five", "25")),
        q("reasoning", "If yesterday was Friday, what day is today?", "saturday"),
        q("conversion", "How many feet are in a yard?", ("three", "3")),
        q("conversion", "How many days are in a leap year?",
          ("three hundred sixty-six", "three hundred and sixty-six", "366")),
        q("conversion", "About how many kilometers are in ten miles?",
          ("sixteen", "16", "16.1", "sixteen point one")),
        q("conversion", "How many minutes are in two hours?",
          ("hundred and twenty", "hundred twenty", "120")),
        q("how-to", "How do I make scrambled eggs?", ("eggs", "egg"), ("pan", "whisk", "stir")),
        q("how-to", "How can I fall asleep faster?", ("bed", "sleep", "screen", "relax")),
        q("how-to", "How long should I brush my teeth?", ("two", "2"), ("minutes", "minute")),
        q("how-to", "How do I cook rice?", "water", ("boil", "simmer", "cook")),
        q("small talk", "Tell me a long story about a brave knight and a dragon.",
          ("knight", "dragon"), avoid=("can't assist", "cannot assist")),
        q("identity", "What is your name?", ("vera", "assistant"), avoid=NOT_MINE),
        q("identity", "Which model are you running on?", ("qwen", "model"), avoid=NOT_MINE),
        q("identity", "Are you a human?", ("no", "not", "ai", "assistant", "computer")),
        q("cannot", "Book me a table for two tonight.", CANNOT, avoid=PRETENDS),
        q("cannot", "Order me a pizza, please.", CANNOT, avoid=PRETENDS),
        q("cannot", "Call my mom for me.", CANNOT, avoid=PRETENDS),
        q("cannot", "Set an alarm for seven tomorrow morning.", CANNOT, avoid=PRETENDS),
        q("follow-up", "And Spain?", "madrid",
          before=(("What is the capital of Portugal?", "The capital of Portugal is Lisbon."),)),
        q("follow-up", "And how many in a fortnight?", ("fourteen", "14"),
          before=(("How many days are in a week?", "There are seven days in a week."),)),
        q("follow-up", "What is my name?", "sam",
          before=(("Hi, my name is Sam.", "Nice to meet you, Sam!"),)),
        q("follow-up", "Sorry, I meant Spain.", "madrid",
          before=(("What is the capital of France?", "The capital of France is Paris."),)),
        q("tool", "Turn the living room lights off.", "set_lights", ("living", "living_room"),
          tools=BOTH),
        q("tool", "Do I need an umbrella in Paris today?", "get_weather", "paris", tools=BOTH),
        q("tool", "How hot is it in Madrid right now?", "get_weather", "madrid", tools=BOTH),
        q("tool", "Lights on in the garage, please.", "set_lights", "garage", tools=BOTH),
    ),
    # Written on 2026-12-06 by a helper that had seen none of the project, to measure
    # app/agent/reckoning.py on phrasings it was not written for (the answers are theirs).
    *held_out(
        q("reasoning", "What's twelve times fifteen?",
          forms("180|one hundred eighty|one hundred and eighty")),
        q("reasoning", "How much is 250 minus 87?",
          forms("163|one hundred sixty three|one hundred sixty-three|one hundred and sixty "
                "three|one hundred and sixty-three")),
        q("reasoning", "What is fifteen percent of eighty?", forms("12|twelve")),
        q("reasoning", "What's half of three hundred and forty?",
          forms("170|one hundred seventy|one hundred and seventy")),
        q("reasoning", "Hey what's seventy two divided by eight?", forms("9|nine")),
        q("reasoning", "Add up 45 and 38 and 17 for me.", forms("100|one hundred|a hundred")),
        q("reasoning", "Um what's a quarter of two hundred?", forms("50|fifty")),
        q("reasoning",
          "If we split a ninety six dollar bill four ways how much does everybody pay?",
          forms("24|twenty four|twenty-four|$24|24 dollars|twenty four dollars|twenty-four "
                "dollars")),
        q("conversion", "How many ounces are in a pound?", forms("16|sixteen")),
        q("conversion", "What is five miles in kilometers?",
          forms("8.05|8.047|8|eight|eight point zero five|eight point zero four seven|"
                "about eight")),
        q("conversion", "Convert 100 fahrenheit to celsius.",
          forms("37.8|37.78|38|thirty seven point eight|thirty-seven point eight|thirty "
                "eight|thirty-eight")),
        q("conversion", "How many cups in a gallon?", forms("16|sixteen")),
        q("conversion", "How many minutes are in three and a half hours?",
          forms("210|two hundred ten|two hundred and ten")),
        q("conversion", "What's seventy kilos in pounds?",
          forms("154.3|154.32|154|one hundred fifty four|one hundred fifty-four|one hundred and "
                "fifty four|one hundred fifty four point three|"
                "one hundred fifty-four point three")),
        q("conversion", "How far is a 10k in miles?",
          forms("6.2|6.21|6.214|six point two|six point two one|about six point two")),
        q("conversion", "About how many liters are in a gallon?",
          forms("3.79|3.785|3.8|4|three point seven nine|three point seven eight five|three point"
                " eight|four|about four")),
        q("conversion", "How many feet is two meters?",
          forms("6.56|6.6|6.562|six point five six|six point six|six and a half|about six and a "
                "half")),
        q("conversion", "Convert twenty five degrees celsius to fahrenheit.",
          forms("77|seventy seven|seventy-seven")),
        q("days", "If today's tuesday what day will it be in ten days?", forms("friday")),
        q("days", "If christmas falls on a thursday what day is new year's day?",
          forms("thursday")),
        q("days", "What day of the week is it today?", TODAY_WEEKDAY),
        q("days", "If my birthday's on a monday what day was three days before that?",
          forms("friday")),
        q("days", "What's the date today?", *TODAY_DATE),
        q("days", "If march first is a sunday what day of the week is march fifteenth?",
          forms("sunday")),
        part="blind",
    ),
    # Written on 2026-12-07 by a helper that had seen none of the project, told only the
    # kinds, the tools and which questions were taken, after the held-out half had been
    # looked at for the 1.5B's instructions: held out from everything since.
    *held_out(
        q("fact", "How many sides does a hexagon have?", forms("6|six")),
        q("fact", "What's the chemical symbol for gold?", "au"),
        q("fact", "Who painted the ceiling of the Sistine Chapel?", "michelangelo"),
        q("fact", "What's the longest river in Africa?", "nile"),
        q("fact", "Hey, what's the capital of Australia?", "canberra"),
        q("fact", "Which planet is called the Red Planet?", "mars"),
        q("fact", "Who was the first person to walk on the moon?", ("armstrong", "neil armstrong")),
        q("fact", "What's the hardest natural substance?", ("diamond", "diamonds")),
        q("fact", "Um, how many players does a soccer team have on the field?", forms("11|eleven")),
        q("reasoning", "What's eight times nine?", forms("72|seventy two|seventy-two")),
        q("reasoning", "What's a hundred minus thirty-five?", forms("65|sixty five|sixty-five")),
        q("reasoning", "What's forty-five plus thirty-eight?",
          forms("83|eighty three|eighty-three")),
        q("reasoning", "If I have twenty dollars and spend seven, how much do I have left?",
          forms("13|thirteen")),
        q("reasoning", "If today is Wednesday, what day is the day after tomorrow?", "friday"),
        q("reasoning",
          "Tom is taller than Sam, and Sam is taller than Alex. Who's the shortest?", "alex"),
        q("conversion", "How many inches are in a foot?", forms("12|twelve")),
        q("conversion", "How many millilitres are in a litre?",
          forms("1000|1,000|thousand|one thousand|a thousand")),
        q("conversion", "How many pounds is five kilograms?",
          forms("11|eleven|11.02|11.0|eleven point zero two|about eleven|eleven pounds")),
        q("conversion", "What's thirty degrees Celsius in Fahrenheit?",
          forms("86|eighty six|eighty-six")),
        q("conversion", "How many centimetres are in an inch?",
          forms("2.54|2.5|two point five four|two point five|two and a half")),
        q("conversion", "How many days are in three weeks?", forms("21|twenty one|twenty-one")),
        q("how-to", "How do I make a grilled cheese sandwich?", "cheese",
          ("pan", "skillet", "griddle", "butter", "toast", "toaster")),
        q("how-to", "Hey, how do I get rid of hiccups?",
          ("water", "breath", "breathe", "breathing", "sugar")),
        q("how-to", "How do I get a splinter out of my finger?", ("tweezers", "needle", "tape")),
        q("how-to", "How do I unclog a kitchen sink?",
          ("plunger", "plunge", "baking soda", "vinegar", "boiling water", "hot water", "snake",
           "auger")),
        q("identity", "What can you help me with?", ("answer", "questions", "help", "talk", "chat"),
          avoid=NOT_MINE),
        q("identity", "Are you a real person?",
          ("ai", "assistant", "not a person", "not human", "not a real person", "artificial",
           "computer", "program", "no"),
          avoid=(*NOT_MINE, r"\bi am a (real )?(person|human)", r"\bi'm a (real )?(person|human)")),
        q("identity", "Which AI model are you running on?", ("qwen", "model"), avoid=NOT_MINE),
        q("identity", "Who built you?", ("qwen", "alibaba", "vera", "voice agent"), avoid=NOT_MINE),
        q("cannot", "Send a text to my sister saying I'll be late.", CANNOT, avoid=PRETENDS),
        q("cannot", "Can you play some jazz music for me?", CANNOT, avoid=PRETENDS),
        q("cannot", "Lock the front door for me, please.", CANNOT, avoid=PRETENDS),
        q("cannot", "Buy me two movie tickets for tonight.", CANNOT, avoid=PRETENDS),
        q("follow-up", "And Greece?", "athens",
          before=(("What's the capital of Egypt?", "The capital of Egypt is Cairo."),)),
        q("follow-up", "And what's that divided by two?", forms("21|twenty one|twenty-one"),
          before=(("What's six times seven?", "Six times seven is forty-two."),)),
        q("follow-up", "What country was she from?",
          ("england", "english", "britain", "british", "uk", "united kingdom"),
          before=(("Who wrote Pride and Prejudice?",
                   "Pride and Prejudice was written by Jane Austen."),)),
        q("follow-up", "What's its capital?", "moscow",
          before=(("What's the largest country in the world by area?",
                   "Russia is the largest country by area."),)),
        q("tool", "Hey, switch off the bathroom lights.", "set_lights", "bathroom", tools=BOTH),
        q("tool", "Can you turn on the lights in the office?", "set_lights", "office", tools=BOTH),
        q("tool", "What's the weather like in Tokyo today?", "get_weather", "tokyo", tools=BOTH),
        part="fresh",
    ),
    *held_out(
        # fact (9)
        q(
            "fact",
            "How many bones are in the adult human body?",
            forms("206|two hundred six|two hundred and six|two-hundred-six"),
        ),
        q("fact", "What's the smallest planet in our solar system?", "mercury"),
        q(
            "fact",
            "Um, what year did World War Two end?",
            forms("1945|nineteen forty five|nineteen forty-five"),
        ),
        q("fact", "Hey, how many hearts does an octopus have?", forms("3|three")),
        q("fact", "What's the plural of mouse?", "mice"),
        q("fact", "How many keys are on a standard piano?", forms("88|eighty eight|eighty-eight")),
        q("fact", "What's the capital of Egypt?", "cairo"),
        q("fact", "What's the main ingredient in guacamole?", ("avocado", "avocados")),
        q("fact", "How many holes are in a full round of golf?", forms("18|eighteen")),
        # arithmetic (6)
        q("arithmetic", "What's seventeen plus twenty-six?", forms("43|forty three|forty-three")),
        q("arithmetic", "Hey, what's nine times seven?", forms("63|sixty three|sixty-three")),
        q("arithmetic", "What's twenty percent of ninety?", forms("18|eighteen")),
        q(
            "arithmetic",
            "If a pizza has twelve slices and we eat five, how many are left?",
            forms("7|seven"),
        ),
        q(
            "arithmetic",
            "Um, what's a hundred and forty-four divided by nine?",
            forms("16|sixteen"),
        ),
        q(
            "arithmetic",
            "I bought three shirts for fifteen dollars each. How much did I spend?",
            forms("45|forty five|forty-five"),
        ),
        # conversion (6)
        q("conversion", "How many teaspoons are in a tablespoon?", forms("3|three")),
        q(
            "conversion",
            "How many seconds are in an hour?",
            forms("3600|3,600|three thousand six hundred|three thousand, six hundred"),
        ),
        q("conversion", "How many ounces are in a cup?", forms("8|eight")),
        q(
            "conversion",
            "Hey, how many meters are in a kilometer?",
            forms("1000|1,000|one thousand|a thousand"),
        ),
        q("conversion", "How many quarts are in a gallon?", forms("4|four")),
        q(
            "conversion",
            "How many hours are in a week?",
            forms(
                "168|one hundred sixty eight|one hundred and sixty eight"
                "|one hundred sixty-eight|one hundred and sixty-eight"
                "|a hundred sixty eight|a hundred and sixty eight"
                "|a hundred sixty-eight|a hundred and sixty-eight"
            ),
        ),
        # how-to (4)
        q(
            "how-to",
            "How do I make pancakes?",
            ("flour",),
            ("pan", "pans", "griddle", "skillet", "frying pan"),
        ),
        q(
            "how-to",
            "Um, how do I treat a minor burn?",
            ("water", "cool", "cold", "running water"),
            ("minutes", "minute", "bandage", "gauze", "aloe", "cover", "covering", "dressing"),
        ),
        q(
            "how-to",
            "How do I change a flat tire?",
            ("jack",),
            ("spare", "spare tire", "spare tyre"),
            ("lug nuts", "lug nut", "lugs", "nuts", "bolts", "lug bolts"),
        ),
        q(
            "how-to",
            "Hey, how do I get a red wine stain out of my shirt?",
            (
                "water",
                "salt",
                "baking soda",
                "soap",
                "detergent",
                "club soda",
                "vinegar",
                "stain remover",
                "hydrogen peroxide",
                "dish soap",
            ),
            (
                "blot",
                "blotting",
                "dab",
                "dabbing",
                "soak",
                "soaking",
                "rinse",
                "rinsing",
                "wash",
                "washing",
                "launder",
            ),
        ),
        # identity (4)
        q(
            "identity",
            "Hey, what kind of assistant are you?",
            ("vera", "assistant", "voice"),
            avoid=NOT_MINE,
        ),
        q(
            "identity",
            "Are you alive?",
            (
                "assistant",
                "ai",
                "a.i.",
                "artificial intelligence",
                "voice assistant",
                "program",
                "software",
                "computer",
                "machine",
                "vera",
                "language model",
                "not alive",
            ),
            avoid=(
                *NOT_MINE,
                r"\bi am a (real )?(person|human)",
                r"\bi'm a (real )?(person|human)",
            ),
        ),
        q(
            "identity",
            "What company makes the model you run on?",
            ("alibaba", "qwen"),
            avoid=NOT_MINE,
        ),
        q(
            "identity",
            "Are you Alexa?",
            ("vera",),
            avoid=(*NOT_MINE, r"\bi am alexa\b", r"\bi'm alexa\b"),
        ),
        # cannot (4)
        q("cannot", "Pay my electric bill, please.", CANNOT, avoid=PRETENDS),
        q("cannot", "Hey, book me a flight to Chicago next Friday.", CANNOT, avoid=PRETENDS),
        q("cannot", "Remind me to take out the trash tonight.", CANNOT, avoid=PRETENDS),
        q("cannot", "Um, get me an Uber home.", CANNOT, avoid=PRETENDS),
        # follow-up (4)
        q(
            "follow-up",
            "When was he born?",
            forms("1564|fifteen sixty four|fifteen sixty-four"),
            before=(("Who wrote Hamlet?", "Hamlet was written by William Shakespeare."),),
        ),
        q(
            "follow-up",
            "And the second largest?",
            "canada",
            before=(
                (
                    "What's the largest country in the world by area?",
                    "Russia is the largest country in the world by area.",
                ),
            ),
        ),
        q(
            "follow-up",
            "And July?",
            forms("31|thirty one|thirty-one"),
            before=(("How many days are in June?", "June has thirty days."),),
        ),
        q(
            "follow-up",
            "What about in French?",
            "merci",
            before=(("How do you say thank you in Spanish?", "In Spanish, thank you is gracias."),),
        ),
        # tool (3)
        q(
            "tool",
            "Turn the hallway lights on, please.",
            "set_lights",
            ("hallway", "hall"),
            tools=BOTH,
        ),
        q(
            "tool",
            "Um, shut off the dining room lights.",
            "set_lights",
            ("dining room", "dining_room", "dining"),
            tools=BOTH,
        ),
        q("tool", "Hey, is it cold in Toronto right now?", "get_weather", "toronto", tools=BOTH),
        part="unseen",
    )
]  # fmt: skip


def right(question: Question, answer: str) -> bool:
    said = answer.lower().replace("\u2019", "'")
    if any(re.search(pattern, said) for pattern in question.avoid):
        return False
    return all(any(re.search(rf"(?<!\w){re.escape(w)}(?!\w)", said) for w in g)
               for g in question.expect)  # fmt: skip


@dataclass(slots=True)
class Asked:
    question: Question
    answer: str
    first_token_s: float
    tokens_per_s: float | None
    cut: str | None


async def ask(llm: LlamaCppLLM, settings: LlmSettings, question: Question) -> Asked:
    system = filled(settings.system_prompt, model=llm.model_name, tools=bool(question.tools))
    messages: list[ChatMessage] = [{"role": "system", "content": system}]
    for said, answered in question.before:
        messages += [{"role": "user", "content": said}, {"role": "assistant", "content": answered}]
    messages.append({"role": "user", "content": question.text})
    tokens = TokenCount()
    started = time.perf_counter()
    first: float | None = None
    parts: list[str] = []
    told = with_workings(messages, ENGLISH) if settings.work_out else messages
    stream = llm.stream(told, tools=list(question.tools) or None, tokens=tokens)
    reply, guard = reply_rules(
        stream, messages, language=ENGLISH, acts=bool(question.tools),
        soft_words=settings.max_spoken_words,
    )  # fmt: skip
    async for delta in reply:
        first = first or time.perf_counter()
        if isinstance(delta, ToolCallDelta):
            parts.append(f"{delta.name} " if delta.name else delta.arguments)
        else:
            parts.append(delta)
    ended = time.perf_counter()
    first = first or ended
    rate = (tokens.completion - 1) / (ended - first) if tokens.completion > 2 else None
    return Asked(question, "".join(parts).strip(), first - started, rate, guard.stopped)


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p * (len(ordered) - 1)))]


async def measure(
    settings: LlmSettings, runs: int, show_wrong: bool, questions: list[Question]
) -> None:
    path = settings.model_path
    llm = await asyncio.to_thread(LlamaCppLLM, settings)
    asked = [await ask(llm, settings, question) for _ in range(runs) for question in questions]
    await llm.aclose()
    kinds = list(dict.fromkeys(question.kind for question in questions))
    per_kind = ", ".join(
        f"{kind} {sum(right(a.question, a.answer) for a in asked if a.question.kind == kind)}"
        f"/{sum(a.question.kind == kind for a in asked)}"
        for kind in kinds
    )
    firsts = [a.first_token_s * 1000 for a in asked]
    rates = [a.tokens_per_s for a in asked if a.tokens_per_s]
    total = sum(right(a.question, a.answer) for a in asked)
    size_mib = os.path.getsize(path) / 2**20  # noqa: ASYNC240
    print(f"\n{Path(path).name}  ({size_mib:.0f} MiB)")
    print(f"  right: {total}/{len(asked)}  ({per_kind})")
    print("  " + parts_line([(a.question, right(a.question, a.answer)) for a in asked]))
    print(f"  first token: p50 {percentile(firsts, 0.5):.0f} ms, "
          f"p95 {percentile(firsts, 0.95):.0f} ms;"
          f"  tokens/s p50 {statistics.median(rates) if rates else 0:.1f}")  # fmt: skip
    cuts = [a.cut for a in asked if a.cut]
    print(f"  replies cut by the guard: {len(cuts)} ({', '.join(sorted(set(cuts))) or 'none'})")
    for a in asked:
        if show_wrong and not right(a.question, a.answer):
            print(f"    wrong ({a.question.part}): {a.question.text!r} -> "
                  f"{json.dumps(a.answer)[:160]}")  # fmt: skip


async def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--gguf", nargs="*", help="GGUF files (default: the bundled ones)")
    parser.add_argument("--runs", type=int, default=1, help="times each question is asked")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--show-wrong", action="store_true")
    parser.add_argument("--prompt", default="", help="a system prompt (default: the server's)")
    parser.add_argument(
        "--half", choices=HALVES, default="both",
        help="tuned: only the half a prompt may be tuned on",
    )  # fmt: skip
    parser.add_argument("--kind", help="only questions of this kind (days, tool, ...)")
    parser.add_argument(
        "--no-work-out", action="store_true", help="without app/agent/reckoning.py's notes"
    )
    args = parser.parse_args()
    print(machine())
    paths = args.gguf or list(installed().values())
    questions = chosen(args.half, args.kind)
    print(f"{len(questions)} questions x {args.runs}, {args.threads} threads")
    for path in paths:
        settings = LlmSettings(
            model_path=path,
            n_threads=args.threads,
            work_out=not args.no_work_out,
            **({"system_prompt": args.prompt} if args.prompt else {}),
        )
        await measure(settings, args.runs, args.show_wrong, questions)


if __name__ == "__main__":
    asyncio.run(main())
