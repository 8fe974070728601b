"""benchmarks/cli_startup.py runs and gates on its target (a smoke test, not a timing test)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "cli_startup.py"


def run(*args):
    return subprocess.run([sys.executable, str(SCRIPT), "-n", "1", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


def test_reports_median_and_ratio_and_passes_generous_target():
    proc = run("--target", "60")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("--help"))
    median, _, _, ratio = (float(x) for x in line.split()[1:5])
    assert median > 0 and abs(ratio - median / 60) < 0.01


def test_fails_when_over_target():
    proc = run("--target", "0.000001")
    assert proc.returncode == 1
    assert "FAIL" in proc.stdout
