"""The import contract of the layers: profiles -> core -> services -> (CLI | TUI), launchers beside services.

Read from the source (no module is imported), counting every import at any depth: lazy ones inside
functions and ``TYPE_CHECKING`` blocks too, since a lazy import is still a dependency. A package
``__init__`` that defines nothing (it only hands names on) is read as the modules it re-exports from.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ("advisor", "launchers", "kernels", "profiles")

# The front ends and the application layer; everything else under advisor/ is the core.
SERVICES, TUI, CLI, COMMANDS = "advisor.services", "advisor.tui", "advisor.cli", "advisor.commands"
# command_table: the CLI's parser
NOT_CORE = (SERVICES, TUI, CLI, COMMANDS, "advisor.command_table", "advisor.__main__")
# The only modules that draw on a terminal.
RENDERERS = (TUI, CLI, "advisor.rich_render")


@dataclass(frozen=True)
class Import:
    importer: str   # dotted module name
    target: str     # dotted name as written (a module, or a module's attribute)
    where: str      # path:line, for the failure message

    def __str__(self) -> str:
        return f"{self.where}: {self.importer} imports {self.target}"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _files() -> dict[str, Path]:
    return {_module_name(p): p for pkg in SHIPPED for p in sorted((ROOT / pkg).rglob("*.py"))}


def _imports(module: str, path: Path) -> list[Import]:
    return _imports_in(module, path.read_text(encoding="utf-8"), str(path.relative_to(ROOT)),
                       is_package=path.name == "__init__.py")


def _imports_in(module: str, source: str, shown: str, is_package: bool = False) -> list[Import]:
    package = module if is_package else module.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(source)):
        where = f"{shown}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, ast.Import):
            found += [Import(module, alias.name, where) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            found += [Import(module, f"{base}.{alias.name}", where) for alias in node.names]
    return found


ALL_IMPORTS = {module: _imports(module, path) for module, path in _files().items()}


def _within(name: str, prefixes: tuple[str, ...] | str) -> bool:
    prefixes = (prefixes,) if isinstance(prefixes, str) else prefixes
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def _violations(importers, forbidden: tuple[str, ...]) -> list[str]:
    return [str(imp) for module, imps in sorted(ALL_IMPORTS.items()) if importers(module)
            for imp in imps if _within(imp.target, forbidden)]


def _is_core(module: str) -> bool:
    return _within(module, "advisor") and module != "advisor" and not _within(module, NOT_CORE)


LAYER_RULES = {
    "the core imports no services, launchers, TUI or CLI":
        (_is_core, (SERVICES, "launchers", TUI, CLI, COMMANDS)),
    "launchers import no TUI, CLI, commands or services":
        (lambda m: _within(m, "launchers"), (TUI, CLI, COMMANDS, SERVICES)),
    "the TUI imports neither the CLI nor its commands":
        (lambda m: _within(m, TUI), (CLI, COMMANDS)),
    "only the TUI, the CLI and the Rich rendering module import textual or rich":
        (lambda m: not _within(m, RENDERERS), ("textual", "rich", "textual_plotext")),
}


@pytest.mark.parametrize("rule", list(LAYER_RULES))
def test_layer_rule(rule):
    importers, forbidden = LAYER_RULES[rule]
    bad = _violations(importers, forbidden)
    assert not bad, f"{rule}; broken by:\n  " + "\n  ".join(bad)


# --- cycles ---------------------------------------------------------------------------------------

def _face_members(files: dict[str, Path]) -> dict[str, dict[str, str]]:
    """Package faces (an __init__ that defines nothing) -> {re-exported name: the module it comes from}."""
    faces = {}
    for module, path in files.items():
        if path.name != "__init__.py":
            continue
        body = ast.parse(path.read_text(encoding="utf-8")).body
        defines = [n for n in body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                   or (isinstance(n, (ast.Assign, ast.AnnAssign))
                       and not all(isinstance(t, ast.Name) and t.id == "__all__"
                                   for t in (n.targets if isinstance(n, ast.Assign) else [n.target])))]
        if not defines:
            faces[module] = {imp.target.rpartition(".")[2]: imp.target.rpartition(".")[0]
                             for imp in ALL_IMPORTS[module]}
    return faces


def _graph() -> dict[str, set[str]]:
    files = _files()
    faces = _face_members(files)

    def resolve(target: str) -> set[str]:
        """The shipped modules an import names: the module itself, or its package; a face's members."""
        name = target
        while name and name not in files:
            name = name.rpartition(".")[0]
        if not name:
            return set()                                    # third party or standard library
        if name in faces:
            attr = target[len(name) + 1:].partition(".")[0]
            picked = faces[name].get(attr)
            members = {picked} if picked else set(faces[name].values())
            return {m for member in members for m in resolve(member)} - {name}
        return {name}

    return {module: {t for imp in imps for t in resolve(imp.target)} - {module}
            for module, imps in ALL_IMPORTS.items() if module not in faces}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next((c for c in children if c in graph), None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def _describe(component: list[str], graph: dict[str, set[str]]) -> str:
    inside = set(component)
    edges = [f"    {a} -> {b}" for a in component for b in sorted(graph[a] & inside)]
    return "  " + ", ".join(component) + "\n" + "\n".join(edges)


def test_no_import_cycle():
    graph = _graph()
    cycles = _cycles(graph)
    assert not cycles, "modules that import each other (at any depth):\n" + "\n".join(
        _describe(c, graph) for c in cycles)


def test_the_checker_counts_lazy_and_relative_imports_and_finds_loops():
    source = "import yaml\ndef f():\n    from ..cli import main\n    if True:\n        from . import render\n"
    targets = [imp.target for imp in _imports_in("advisor.tui.app", source, "app.py")]
    assert targets == ["yaml", "advisor.cli.main", "advisor.tui.render"]
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": set()}) == []
