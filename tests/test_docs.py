"""The README and the docs site (make docs builds the site with --strict, which checks the
links between docs pages): what the site build does not read is checked here."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType

from app.cli import _fields, flag
from app.config import Settings

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def headings(path: Path) -> list[str]:
    """The Markdown headings of `path`, outside fenced code."""
    found, fenced = [], False
    for line in path.read_text().splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and line.startswith("#"):
            found.append(line.lstrip("#").strip())
    return found


def github_anchor(heading: str) -> str:
    """The anchor GitHub gives a heading (MkDocs gives the same to ours)."""
    return re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")


def test_the_readme_fits_a_newcomers_page() -> None:
    assert len(README.read_text().splitlines()) < 250


def test_the_readmes_links_reach_a_file_and_a_heading() -> None:
    links = [target for target in LINK.findall(README.read_text()) if "://" not in target]
    assert links, "the README links into docs/"
    for target in links:
        path, _, anchor = target.partition("#")
        file = (README.parent / path).resolve()
        assert file.is_file(), f"README links to {path}, which does not exist"
        if anchor:
            anchors = {github_anchor(heading) for heading in headings(file)}
            assert anchor in anchors, f"README links to {target}: no such heading in {path}"


def test_the_home_page_says_what_the_readme_says_it_is() -> None:
    """README.md and docs/index.md are the two front doors; their "What it is" agrees."""
    text = README.read_text()
    section = text.split("## What it is\n", 1)[1].split("\n## ", 1)[0].strip()
    assert section in (ROOT / "docs" / "index.md").read_text()


def load_hook(name: str) -> ModuleType:
    """An MkDocs hook (docs/hooks/<name>.py), loaded as mkdocs.yml loads it."""
    path = ROOT / "docs" / "hooks" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"docs_hook_{name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_settings_reference_lists_every_setting() -> None:
    hook = load_hook("settings")
    tables = hook.settings_tables()
    for path, _ in _fields(Settings):
        env = "VOICE_" + "__".join(part.upper() for part in path.split("."))
        row = next((line for line in tables.splitlines() if f"`{flag(path)}`" in line), None)
        assert row is not None, f"{path} is missing from the settings reference"
        assert f"`{env}`" in row
    assert hook.MARKER in (ROOT / "docs" / hook.PAGE).read_text()


def test_lists_written_for_github_render_as_lists_in_the_site() -> None:
    gfm_lists = load_hook("lists").gfm_lists
    page = "Text:\n- one\n  - nested\n  more\n\n  A paragraph of it.\n- two\n\nAfter.\n"
    assert gfm_lists(page) == (
        "Text:\n\n- one\n    - nested\n    more\n\n    A paragraph of it.\n\n- two\n\nAfter.\n"
    )
    code = "```\n- not a list\n```\n"
    assert gfm_lists(code) == code
