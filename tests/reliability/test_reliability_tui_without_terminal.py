"""`nvfp4-advisor tui` from a script (stdin not a terminal) used to draw its screen and wait for keys
that never come, forever; now it is one usage line."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytestmark = pytest.mark.timeout(120)


@pytest.mark.parametrize("args", [["tui"], ["tui", "demo:qwen3-8b-nvfp4", "--gpu", "rtx-3090"]])
def test_tui_without_a_terminal_is_a_usage_error_not_a_hang(args):
    p = subprocess.run([sys.executable, "-m", "advisor", *args], capture_output=True, text=True,
                       stdin=subprocess.DEVNULL, timeout=60)
    assert p.returncode == 2, p.stderr[-500:]
    assert p.stderr.count("\n") == 1 and "needs a terminal" in p.stderr
    assert p.stdout == ""
