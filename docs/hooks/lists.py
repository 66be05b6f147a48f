"""MkDocs hook: lists written as GitHub reads them, rendered the same in the site.

The pages are written to read on GitHub: a list may follow its paragraph's last line
directly, and nested lists and continuation lines are indented by 2 spaces. MkDocs'
Python-Markdown wants a blank line before a list and 4 spaces per level, and otherwise
runs the list into the paragraph. So before each page renders, this adds the blank line
and doubles the indentation inside lists. The files themselves are not changed.
"""

from __future__ import annotations

import re
from typing import Any

ITEM = re.compile(r"^\s*(?:[-*+]|\d+\.)\s")
FENCE = re.compile(r"^\s*(?:```|~~~)")


def on_page_markdown(markdown: str, **_: Any) -> str:
    return gfm_lists(markdown)


def gfm_lists(markdown: str) -> str:
    out: list[str] = []
    in_list = fenced = fence_in_list = loose_item = False
    previous = ""
    for line in markdown.split("\n"):
        if fenced:  # code is kept as written, moved along with the list it is in
            out.append(double(line) if fence_in_list else line)
            fenced = not FENCE.match(line)
            previous = line
            continue
        indent = len(line) - len(line.lstrip(" "))
        if ITEM.match(line) and indent == 0:
            under_text = previous.strip() and not previous.lstrip().startswith("|")
            if under_text and (not in_list or loose_item):
                out.append("")  # a list (or an item) right under a paragraph's last line
            in_list, loose_item = True, False
        elif in_list and not line.strip():
            loose_item = True  # the item goes on in paragraphs of its own
        elif line.strip() and indent == 0 and not previous.strip():
            in_list = False  # a paragraph after a blank line ends the list
        if FENCE.match(line):
            fenced, fence_in_list = True, in_list
        out.append(double(line) if in_list else line)
        previous = line
    return "\n".join(out)


def double(line: str) -> str:
    """The line with its leading spaces doubled: 2 per level becomes Python-Markdown's 4."""
    return " " * (len(line) - len(line.lstrip(" "))) + line
