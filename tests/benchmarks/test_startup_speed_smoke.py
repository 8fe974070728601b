"""benchmarks/startup_speed.py in its smoke mode: every cold-start case runs in a fresh process and the
table carries each one's median, ratio to the `python -c pass` floor, CPU seconds and their ratio to the
floor's, module count and import time.
No timing is asserted (targets are the script's business on a quiet machine)."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import ROOT

CASES = ("python -c pass", "--help", "probe --json", "plan --json", "TUI first paint")


def test_startup_speed_smoke_prints_every_case(tmp_path):
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "startup_speed.py"), "--smoke"], cwd=ROOT,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    rows = {}
    for line in proc.stdout.splitlines():
        for case in CASES:
            if line.startswith(case + " "):
                rows[case] = line[len(case):].split()
    assert set(rows) == set(CASES), proc.stdout
    median, _min, _first, ratio, cpu, cpu_ratio, modules, import_s, target, verdict = rows["python -c pass"]
    assert (ratio, cpu_ratio, target, verdict) == ("1.00", "1.00", "-", "floor")
    counts = {case: int(cols[6]) for case, cols in rows.items()}
    # each entry point loads more than the bare interpreter, the TUI the most
    assert all(counts[c] > counts["python -c pass"] for c in CASES[1:])
    assert counts["TUI first paint"] == max(counts.values())
    for case in CASES[1:]:
        assert float(rows[case][3]) > 0 and float(rows[case][4]) > 0 and rows[case][9] in ("ok", "over")
