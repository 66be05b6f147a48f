from __future__ import annotations

import pytest

from app.agent.chunker import ClauseChunker, speakable
from app.agent.spoken_form import SpokenForm, said_length


def feed(chunker: ClauseChunker, text: str, step: int = 3) -> list[str]:
    pieces: list[str] = []
    for i in range(0, len(text), step):
        pieces.extend(chunker.push(text[i : i + step]))
    return pieces + chunker.flush()


def test_first_piece_is_the_first_clause_then_sentences() -> None:
    text = (
        "Well, the capital of France, as you know, is Paris. It is lovely in spring, I hear. Bye!"
    )
    pieces = feed(ClauseChunker(first_max_words=12), text)
    assert pieces[0] == "Well, the capital of France,"
    assert pieces[1:] == ["as you know, is Paris.", "It is lovely in spring, I hear.", "Bye!"]


def test_by_default_the_first_piece_is_short_and_long_sentences_are_split_at_clauses() -> None:
    text = (
        "The capital of the United States is Washington. It was named after George "
        "Washington, the first president, and it sits on the Potomac river between "
        "Maryland and Virginia, which gave the land."
    )
    pieces = feed(ClauseChunker(), text)
    assert pieces[0] == "The capital of the"
    assert pieces[1] == "United States is Washington."
    assert pieces[2] == "It was named after George Washington,"
    assert all(len(piece.split()) <= 18 for piece in pieces)
    assert " ".join(pieces) == text


def test_each_piece_is_at_most_about_twice_the_one_before() -> None:
    """Kokoro makes the next piece while this one plays: a piece much longer than the
    one before would not be ready in time, and the reply would stop mid-sentence."""
    words = " ".join(f"word{n}" for n in range(60))
    pieces = feed(ClauseChunker(first_max_words=4), words)
    assert [len(piece.split()) for piece in pieces] == [4, 8, 14, 18, 16]
    assert " ".join(pieces) == words
    # The limit is in characters (Kokoro's time follows the sounds, not the words).
    text = "The moon is about three hundred and eighty thousand kilometres away from the Earth."
    assert feed(ClauseChunker(), text) == [
        "The moon is about",
        "three hundred and eighty thousand kilometres",
        "away from the Earth.",
    ]


def test_how_fast_the_pieces_grow_follows_how_fast_they_are_made() -> None:
    text = "The moon is about three hundred and eighty thousand kilometres away from the Earth."
    # A TTS fifty times faster than speech (a GPU): only the opening is cut off.
    assert feed(ClauseChunker(growth=50), text) == [
        "The moon is about",
        "three hundred and eighty thousand kilometres away from the Earth.",
    ]
    # A slow one: the second piece may be only half as long again as the first.
    assert feed(ClauseChunker(growth=1.5), text) == [
        "The moon is about",
        "three hundred and eighty thousand",
        "kilometres away from the Earth.",
    ]


def test_a_limit_set_from_the_audio_ahead_replaces_the_growth() -> None:
    text = "The moon is about three hundred and eighty thousand kilometres away from the Earth."
    roomy = ClauseChunker(growth=1.5)
    roomy.limit_chars = 200  # much audio ahead: the rest of the sentence in one piece
    assert feed(roomy, text)[1:] == [
        "three hundred and eighty thousand kilometres away from the Earth."
    ]
    tight = ClauseChunker(growth=50)
    tight.limit_chars = 0  # none: as short as a piece may be
    assert feed(tight, text)[1:] == [
        "three hundred and",
        "eighty thousand kilometres",
        "away from the Earth.",
    ]
    # Where the text's phrases are known, never inside a number.
    tight = ClauseChunker(growth=50, phrases=True)
    tight.limit_chars = 0
    assert feed(tight, "Sure. " + text)[1:] == [
        "The moon is about",
        "three hundred and eighty thousand kilometres away from the Earth.",
    ]


def test_a_clause_mark_past_the_limit_ends_the_piece() -> None:
    text = "The moon is a planet in our solar system, orbiting the Sun. It is far."
    short = ClauseChunker(phrases=True)
    short.limit_chars = 17  # the audio ahead of a first piece decoded twice
    assert feed(short, text)[1:3] == ["in our solar system,", "orbiting the Sun."]
    roomy = ClauseChunker(phrases=True)
    roomy.limit_chars = 60
    assert feed(roomy, text)[1] == "in our solar system, orbiting the Sun."
    # Far past the limit, a phrase's end near it is the cut.
    text = "It is Paris. Paris is a city in the French-speaking world, with many landmarks."
    short = ClauseChunker(phrases=True)
    short.limit_chars = 27
    assert feed(short, text)[1:3] == ["Paris is a city", "in the French-speaking world,"]


def test_a_later_piece_s_limit_counts_the_characters_the_voice_says() -> None:
    """Kokoro's time follows what it says: "384,400 km" is 62 characters said."""
    said = SpokenForm()
    text = "Sure. The moon is 384,400 km away from the Earth, and it goes round it once a month."
    as_written = ClauseChunker(phrases=True)
    as_said = ClauseChunker(phrases=True, measure=lambda piece: len(said(piece)))
    as_written.limit_chars = as_said.limit_chars = 30
    assert feed(as_written, text)[1] == "The moon is 384,400 km away from the Earth,"
    assert feed(as_said, text)[1:3] == ["The moon is 384,400 km away", "from the Earth,"]


def test_a_one_word_opening_does_not_chop_the_sentence_after_it() -> None:
    text = "Yes. The capital of France is Paris, and it is lovely in spring."
    assert feed(ClauseChunker(), text) == [
        "Yes.",
        "The capital of France is Paris,",
        "and it is lovely in spring.",
    ]


def test_a_piece_past_its_limit_ends_at_a_boundary_close_by_not_before_a_scrap() -> None:
    text = "The capital of France is Paris, a city known for its art and food."
    assert feed(ClauseChunker(), text) == [
        "The capital of France",
        "is Paris, a city known for its art and food.",
    ]
    text = "It is blue because the air scatters blue light more than red."
    assert feed(ClauseChunker(), text) == [
        "It is blue because",
        "the air scatters blue light more than red.",
    ]
    text = "It is blue because the air scatters blue light more than it does the red one."
    assert feed(ClauseChunker(), text) == [
        "It is blue because",
        "the air scatters blue light more than",
        "it does the red one.",
    ]


def test_numbers_and_decimals_are_not_cut() -> None:
    pieces = feed(
        ClauseChunker(first_max_words=12), "It costs 3.50 dollars, or 1,000 yen in total today."
    )
    assert pieces == ["It costs 3.50 dollars,", "or 1,000 yen in total today."]


def test_a_mark_after_a_words_letters_ends_a_piece_before_the_next_token() -> None:
    """The voice starts on "Hello there." without waiting for the token after it; a mark
    after a digit, an initial, an abbreviation or the start of an address may go on
    ("3.5", "J. R.", "Dr. Who", "https://", "www.example.com"), so there the piece waits
    for the whitespace, and the spoken form sees the address whole."""
    chunker = ClauseChunker()
    assert chunker.push("Hello there.") == ["Hello there."]
    assert chunker.push(" How") == []
    assert chunker.flush() == ["How"]
    for unsure in ("It is 3.", "Ask J.", "Ask Dr.", "See https:", "Go to www.", "Ask bob@x."):
        chunker = ClauseChunker(first_min_words=1)
        assert chunker.push(unsure) == [], unsure
        assert chunker.push(" Yes") == [unsure], unsure


def test_long_run_without_punctuation_is_cut_by_word_count() -> None:
    chunker = ClauseChunker(first_max_words=5)
    pieces = chunker.push("one two three four five six seven ")
    assert pieces == ["one two three four five"]


def test_markdown_is_not_spoken() -> None:
    assert speakable("**Paris** is the `capital` # of France") == "Paris is the capital of France"
    assert feed(ClauseChunker(), "** **") == []


def test_chinese_and_japanese_are_cut_at_their_own_marks() -> None:
    """No space follows 。 or 、, and their text has no spaces between words."""
    chunker = ClauseChunker()
    pieces: list[str] = []
    for char in "はい、フランスの首都はパリです。とても綺麗な町で、毎年たくさんの人が訪れます。":
        pieces += chunker.push(char)
    assert pieces == [
        "はい、",
        "フランスの首都はパリです。",
        "とても綺麗な町で、毎年たくさんの人が訪れます。",
    ]
    assert chunker.flush() == []
    assert ClauseChunker().push("法国的首都是巴黎。它很美。") == ["法国的首都是巴黎。", "它很美。"]


def test_text_without_spaces_is_cut_at_the_word_limit_in_characters() -> None:
    """Thai has neither spaces nor marks: a reply's first piece must still come early."""
    thai = "เครื่องละคัลกาเลยครับผมไม่รู้ว่าจะพูดอะไรดีเพราะว่าวันนี้อากาศร้อนมากจริงๆ"
    chunker = ClauseChunker()
    pieces: list[str] = []
    for char in thai:
        pieces += chunker.push(char)
    assert pieces and len(pieces[0]) == 40, pieces
    assert "".join(pieces + chunker.flush()) == thai, "nothing lost"
    english = "Supercalifragilisticexpialidocious is long, they say. "
    assert ClauseChunker().push(english)[0] == "Supercalifragilisticexpialidocious is long,"


@pytest.mark.parametrize(
    "pieces",
    [
        # The first piece ends where a clause may begin: at a mark, before a conjunction...
        ["Sure,", "I can turn on the kitchen lights for you right now."],
        ["I'm doing well,", "thank you for asking.", "How can I help you today?"],
        ["The sky is blue", "because the air scatters blue light more than red light."],
        # ...never before a verb's helper, which Kokoro would speak as a question ("is
        # Madrid." alone is heard "Is mud red?"), nor inside a short sentence...
        ["The capital of Spain is Madrid."],
        ["Blue and yellow make green."],
        # ...and with no such place in twice first_max_words, before the last phrase,
        # past a number's end.
        ["It takes about ten minutes to boil", "an egg in a pot of water."],
        ["The moon is about three hundred and eighty thousand", "kilometres away."],
    ],
    ids=lambda pieces: pieces[0],
)
def test_english_pieces_end_where_phrases_do(pieces: list[str]) -> None:
    text = " ".join(pieces)
    assert feed(ClauseChunker(phrases=True, growth=3.6), text) == pieces


def test_a_number_s_words_hyphenated_are_a_number_s_too() -> None:
    text = "Sure. It is about one hundred and twenty-seven thousand kilometres across the middle."
    chunker = ClauseChunker(phrases=True)
    chunker.limit_chars = 25  # reached at "and"
    assert "one hundred and twenty-seven thousand" in feed(chunker, text)[1]


def test_a_number_said_far_past_the_limit_begins_the_next_piece() -> None:
    said = SpokenForm()
    text = "Sure. It has a diameter of approximately 127,000 kilometers and it is round."
    chunker = ClauseChunker(phrases=True, measure=lambda piece: len(said(piece)))
    chunker.limit_chars = 49  # "127,000" is said in 37 characters
    assert feed(chunker, text)[1] == "It has a diameter of approximately"
    # And so does one that begins in the words read past the limit: cut at the phrase
    # after it, the piece took 1.7 s to make and left a 1.2 s hole (bench.latency).
    chunker = ClauseChunker(phrases=True, measure=lambda piece: len(said(piece)))
    chunker.limit_chars = 32
    text = "Sure. It has a diameter of approximately 127,000 kilometers and a circumference."
    assert feed(chunker, text)[1:3] == ["It has a diameter of approximately", "127,000 kilometers"]
    # Where a phrase cannot end before it, the number stays whole in the piece.
    chunker = ClauseChunker(phrases=True, measure=lambda piece: len(said(piece)))
    chunker.limit_chars = 40
    text = "Sure. It has a diameter of about 127,000 kilometers and it is round."
    assert feed(chunker, text)[1] == "It has a diameter of about 127,000 kilometers"


def test_a_later_piece_at_its_most_words_ends_where_a_phrase_does() -> None:
    """At max_words a later piece ends before the last conjunction or phrase opener in
    its second half, not after a word that needs the next one (bench.latency: "...and is
    composed primarily of" / "rock and metal.")."""
    text = (
        "The moon is a natural satellite of Earth. It has a diameter of about three "
        "thousand four hundred and seventy-four kilometers and is composed primarily of "
        "rock and metal."
    )
    chunker = ClauseChunker(phrases=True, measure=lambda piece: said_length(piece, "en"))
    chunker.limit_chars = 183  # the audio ahead leaves room: the word limit decides
    assert feed(chunker, text)[1:] == [
        "It has a diameter of about three thousand four hundred and seventy-four kilometers",
        "and is composed primarily of rock and metal.",
    ]
    # With no phrase boundary, at the word limit, as before.
    chunker = ClauseChunker(phrases=True, max_words=6)
    chunker.limit_chars = 183
    text = "Sure. Ancient Romans built long roads everywhere across Europe."
    assert feed(chunker, text)[1] == "Ancient Romans built long roads everywhere"
    # Without phrases (another language), the word limit alone decides.
    chunker = ClauseChunker(max_words=6)
    chunker.limit_chars = 183
    assert feed(chunker, "Sure. Ancient Romans and Greeks built long roads.")[1] == (
        "Ancient Romans and Greeks built long"
    )


def test_a_later_piece_is_not_cut_inside_a_number() -> None:
    """At its limit a piece ends at a phrase boundary close by, or later than the limit
    rather than between number words."""
    text = "Sure, it is about three hundred and eighty thousand kilometres away from the Earth."
    assert feed(ClauseChunker(phrases=True, growth=1.5), text) == [
        "Sure,",
        "it is about three hundred and eighty thousand kilometres away",
        "from the Earth.",
    ]
    # Without phrases (a reply in another language), the limit alone decides.
    assert feed(ClauseChunker(growth=1.5), text)[1] == "three hundred and eighty thousand"
