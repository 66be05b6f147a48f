"""constraints.txt pins what make and the image install: a dependency added to
pyproject.toml without make lock would come in at whatever version is newest that day."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_name(requirement: str) -> str:
    match = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", requirement)
    assert match, requirement
    return canonical(match.group())


def pins() -> dict[str, str]:
    pinned = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        if line and not line.startswith("#"):
            name, _, version = line.partition("==")
            assert version, f"not an exact pin: {line!r}"
            pinned[canonical(name)] = version
    return pinned


def test_every_dependency_is_pinned() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = list(project["dependencies"])
    for extra in project["optional-dependencies"].values():
        wanted += extra
    missing = sorted({requirement_name(r) for r in wanted} - pins().keys())
    assert not missing, f"run make lock: {missing} are not in constraints.txt"


def test_make_and_the_image_install_with_the_pins() -> None:
    makefile = (ROOT / "Makefile").read_text()
    assert "pip install --progress-bar off -c constraints.txt -e '.[embedded,dev]'" in makefile
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert "COPY pyproject.toml constraints.txt" in dockerfile
    assert "pip install -c constraints.txt -r /tmp/requirements.txt" in dockerfile
