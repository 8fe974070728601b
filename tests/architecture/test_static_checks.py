"""ruff and mypy pass over the tree, with the settings in pyproject.toml ([tool.ruff], [tool.mypy]).

Both come with the test extra (pinned in .ci/constraints-test.txt), so the README's test command and
CI run them; a failure prints the tools' own report.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _run(tool: str, *args: str) -> subprocess.CompletedProcess[str]:
    if importlib.util.find_spec(tool) is None:
        pytest.fail(f"{tool} is not installed: pip install -c .ci/constraints-test.txt -e '.[test]'")
    return subprocess.run([sys.executable, "-m", tool, *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=900)


def test_ruff_finds_nothing():
    done = _run("ruff", "check", "--output-format", "concise", "--no-fix", ".")
    assert done.returncode == 0, f"ruff check:\n{done.stdout}{done.stderr}"


@pytest.mark.timeout(900)
def test_mypy_finds_nothing():
    done = _run("mypy")   # the packages and options are [tool.mypy]'s
    assert done.returncode == 0, f"mypy:\n{done.stdout}{done.stderr}"
