from __future__ import annotations

from app.audio.chunker import ClauseChunker, speakable


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


def test_numbers_and_decimals_are_not_cut() -> None:
    pieces = feed(
        ClauseChunker(first_max_words=12), "It costs 3.50 dollars, or 1,000 yen in total today."
    )
    assert pieces == ["It costs 3.50 dollars,", "or 1,000 yen in total today."]


def test_a_piece_waits_for_whitespace_after_the_mark() -> None:
    chunker = ClauseChunker()
    assert chunker.push("Hello there.") == []
    assert chunker.push(" How") == ["Hello there."]
    assert chunker.flush() == ["How"]


def test_long_run_without_punctuation_is_cut_by_word_count() -> None:
    chunker = ClauseChunker(first_max_words=5)
    pieces = chunker.push("one two three four five six seven ")
    assert pieces == ["one two three four five"]


def test_markdown_is_not_spoken() -> None:
    assert speakable("**Paris** is the `capital` # of France") == "Paris is the capital of France"
    assert feed(ClauseChunker(), "** **") == []
