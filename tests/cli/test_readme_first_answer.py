"""The README's first-hour answer block is what `nvfp4-advisor` prints for the bundled demo without a GPU.

It is the first thing a new user compares with their screen; it went stale once (141.1 tok/s in the README
after the cost model moved to 119.5) because nothing checked it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _squash(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def readme_answer() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    first_hour = text.split("## The first hour", 1)[1]
    block = re.search(r"^```text\n(.*?)^```", first_hour, re.S | re.M).group(1)
    return [ln for ln in block.splitlines() if ln.strip()]


def test_the_readme_answer_is_what_the_demo_prints(capsys):
    from advisor.cli import main
    from advisor.probe import probe

    if probe().ok:
        pytest.skip("a GPU is here: the answer is for that card, not the README's what-if")
    assert main([]) == 0                  # piped (capsys is not a terminal): the plain answer
    out = _squash(capsys.readouterr().out)
    lines = readme_answer()
    assert len(lines) == 5 and lines[0].startswith("demo:qwen3-8b-nvfp4 on GeForce RTX 3090")
    for line in lines:
        assert _squash(line) in out, f"README line not printed as written: {line!r}"
