"""The application layer imports the core and launchers, never a front end (CLI, commands, TUI) or a
renderer (Rich, Textual, advisor.rich_render). tests/architecture/test_import_contract.py holds the other layers."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def imported(path: Path) -> set[str]:
    """Every module a file imports, at the top or inside a function."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
            names.update(f"{node.module}.{a.name}" for a in node.names)
    return names


def reaches(names: set[str], *prefixes: str) -> set[str]:
    return {n for n in names if any(n == p or n.startswith(p + ".") for p in prefixes)}


def test_services_import_no_front_end_and_no_renderer():
    files = sorted((ROOT / "advisor" / "services").rglob("*.py"))
    assert len(files) >= 8
    bad = {f.relative_to(ROOT).as_posix(): found for f in files
           if (found := reaches(imported(f), "advisor.cli", "advisor.commands", "advisor.tui", "advisor.rich_render",
                                "rich", "textual"))}
    assert not bad
