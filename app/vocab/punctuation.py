"""The marks that end a sentence or a clause: where a reply is cut into pieces, and
how long a pause follows each piece."""

SENTENCE_END = ".!?"
CLAUSE_END = ",;:"
# Chinese and Japanese marks: no space follows them, and their text has no words to count.
WIDE_SENTENCE_END = "。！？"
WIDE_CLAUSE_END = "、，；："
