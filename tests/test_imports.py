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
