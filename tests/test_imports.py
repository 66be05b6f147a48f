"""No import circles in app/: each one is a seam in the wrong place. Imports made
only for type checking count too, since they tie the modules together just the same."""

from __future__ import annotations

import ast
from pathlib import Path

APP = Path(__file__).resolve().parents[1] / "app"


def module_name(path: Path) -> str:
    parts = path.relative_to(APP.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_in(source: str, name: str, package: str, modules: set[str]) -> set[str]:
    """The modules of `modules` that module `name` (in `package`) imports in `source`,
    resolving relative imports and `from pkg import module`."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if alias.name in modules}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*up, base] if base else up)
            for alias in node.names:
                if f"{base}.{alias.name}" in modules:
                    found.add(f"{base}.{alias.name}")
                elif base in modules:
                    found.add(base)
    found.discard(name)
    return found


def import_graph() -> dict[str, set[str]]:
    paths = {module_name(path): path for path in APP.rglob("*.py")}
    modules = set(paths)
    return {
        name: imports_in(
            path.read_text(),
            name,
            name if path.name == "__init__.py" else name.rpartition(".")[0],
            modules,
        )
        for name, path in paths.items()
    }


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle, as the modules along it, or None."""
    done: set[str] = set()

    def visit(module: str, path: list[str]) -> list[str] | None:
        if module in path:
            return [*path[path.index(module) :], module]
        if module in done:
            return None
        for imported in sorted(graph.get(module, ())):
            cycle = visit(imported, [*path, module])
            if cycle:
                return cycle
        done.add(module)
        return None

    for module in sorted(graph):
        cycle = visit(module, [])
        if cycle:
            return cycle
    return None


def test_app_has_no_import_circles() -> None:
    graph = import_graph()
    assert len(graph) > 30 and "app.session.session" in graph["app.calls.manager"]
    cycle = find_cycle(graph)
    assert cycle is None, " -> ".join(cycle or [])


def test_the_check_finds_a_circle_through_a_typing_only_import() -> None:
    sources = {
        "app.a": "from app.b import B\n",
        "app.b": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from app import c\n",
        "app.c": "from .a import A\n",
    }
    graph = {name: imports_in(text, name, "app", set(sources)) for name, text in sources.items()}
    assert find_cycle(graph) == ["app.a", "app.b", "app.c", "app.a"]
    del graph["app.c"]
    assert find_cycle(graph) is None


# What each part of app/ may not import (app packages, and the libraries that belong to
# another layer): the layers of docs/contributing/architecture.md.
TRANSPORTS = ("app.rtc", "app.ws", "app.telephony")
LAYERS: dict[str, tuple[str, ...]] = {
    "app.vocab": ("app.",),  # below everything
    "app.audio": ("app.api", "app.calls", "app.session", "app.engines", "app.agent",
                  "app.realtime", *TRANSPORTS, "aiortc", "fastapi", "starlette"),
    "app.engines": ("app.api", "app.calls", "app.runtime", "app.session", "app.agent",
                    "app.realtime", *TRANSPORTS, "fastapi", "starlette"),
    "app.agent": ("app.api", "app.calls", "app.runtime", "app.session", "app.realtime",
                  *TRANSPORTS, "fastapi", "starlette"),
    "app.session": ("app.api", "app.calls", "app.runtime", "app.engines", "app.realtime",
                    *TRANSPORTS, "aiortc", "fastapi", "starlette"),
    "app.events": ("app.api", "app.calls", "app.runtime", "app.engines", "app.agent",
                   "app.session", "app.realtime", "app.live", *TRANSPORTS, "aiortc", "fastapi",
                   "starlette"),
    "app.realtime": ("app.api", "app.calls", "app.runtime", "app.engines", "app.agent",
                     "app.live", *TRANSPORTS, "aiortc", "fastapi", "starlette"),
    "app.live": ("app.api", "app.calls", "app.runtime", "app.engines", "app.agent",
                 "app.realtime", *TRANSPORTS, "aiortc", "fastapi", "starlette"),
    "app.rtc": ("app.api", "app.calls", "app.runtime", "app.session", "app.realtime",
                "app.telephony", "app.ws", "fastapi", "starlette"),
    "app.ws": ("app.api", "app.calls", "app.runtime", "app.session", "app.realtime",
               "app.rtc", "app.telephony", "aiortc"),
    "app.telephony": ("app.api", "app.runtime", "app.engines", "app.rtc", "aiortc", "fastapi"),
    "app.api": ("app.session", "app.engines", "app.agent"),  # it talks to calls
    "app.tools": ("app.api", "app.calls", "app.runtime", "app.session", "app.engines",
                  "app.agent", "app.realtime", "app.live", *TRANSPORTS, "aiortc", "fastapi"),
}  # fmt: skip


def imported_names(path: Path) -> set[str]:
    """Every module `path` imports, ours and the libraries', by its absolute name."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
    return names


def crossings(root: Path = APP) -> list[str]:
    found = []
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        for layer, forbidden in LAYERS.items():
            if name != layer and not name.startswith(layer + "."):
                continue
            for imported in sorted(imported_names(path)):
                if any(imported == f.rstrip(".") or imported.startswith(f.rstrip(".") + ".")
                       for f in forbidden):  # fmt: skip
                    found.append(f"{name} imports {imported}")
    return found


def test_each_layer_imports_only_what_is_below_it() -> None:
    assert crossings() == []


def test_the_layer_check_sees_a_crossing(tmp_path: Path) -> None:
    """A check that could not fail would prove nothing."""
    session = tmp_path / "app" / "session"
    session.mkdir(parents=True)
    (session / "ok.py").write_text("from app.vocab.pcm import INBOUND_RATE\nimport numpy\n")
    (session / "bad.py").write_text("import aiortc\nfrom app.rtc.peer import RtcPeer\n")
    assert crossings(tmp_path / "app") == [
        "app.session.bad imports aiortc", "app.session.bad imports app.rtc.peer",
    ]  # fmt: skip
