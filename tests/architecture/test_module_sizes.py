"""Modules stay small: one over LIMIT lines says why in its docstring, in words containing "400 lines"
(e.g. "Over ~400 lines on purpose: ..."), so the next reader knows the length is a choice, not drift.

Shipped packages, benchmarks and tests alike; the limit leaves a little room over the team's ~400.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = ("advisor", "launchers", "kernels", "profiles", "benchmarks", "tests")
LIMIT = 420
REASON = "400 lines"


def _modules() -> list[Path]:
    return sorted(p for folder in FOLDERS for p in (ROOT / folder).rglob("*.py")
                  if "__pycache__" not in p.parts and not any(part.startswith(".") for part in p.parts))


def long_without_reason(paths: list[Path]) -> list[tuple[Path, int]]:
    out = []
    for path in paths:
        text = path.read_text(encoding="utf-8")
        lines = text.count("\n") + (not text.endswith("\n") and bool(text))
        if lines <= LIMIT:
            continue
        doc = ast.get_docstring(ast.parse(text)) or ""
        if REASON not in doc:
            out.append((path, lines))
    return out


def test_a_long_module_says_why_in_its_docstring():
    bad = [f"{path.relative_to(ROOT)}: {lines} lines" for path, lines in long_without_reason(_modules())]
    assert not bad, (f"over {LIMIT} lines without a reason in the module docstring (say why in words containing "
                     f"{REASON!r}, or split it at a seam):\n  " + "\n  ".join(bad))


def test_the_check_reads_the_docstring_not_the_body(tmp_path):
    body = "x = 1\n" * (LIMIT + 1)
    said = tmp_path / "said.py"
    said.write_text('"""Over ~400 lines on purpose: one table."""\n' + body)
    comment = tmp_path / "comment.py"
    comment.write_text('"""A module."""\n# over 400 lines because\n' + body)
    short = tmp_path / "short.py"
    short.write_text("x = 1\n" * LIMIT)
    assert long_without_reason([said, comment, short]) == [(comment, LIMIT + 3)]
