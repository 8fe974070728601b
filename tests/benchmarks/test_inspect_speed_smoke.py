"""benchmarks/inspect_speed.py in smoke mode: it builds its header-only checkpoints, times `inspect --json` and
the header-read floor in fresh processes, and prints every figure the full run is judged on (no thresholds)."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.conftest import ROOT

SCRIPT = ROOT / "benchmarks" / "inspect_speed.py"


def test_smoke_prints_the_figures_the_targets_need(tmp_path):
    proc = subprocess.run([sys.executable, str(SCRIPT), "--smoke", "--keep", str(tmp_path / "ck")], cwd=ROOT,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout)
    rows, summary = out["sizes"], out["summary"]
    assert [r["tensors"] for r in rows] == sorted(r["tensors"] for r in rows) and len(rows) >= 2
    for r in rows:
        assert r["fresh_inspect_s"] > 0 and r["fresh_floor_s"] > 0 and r["inproc_us_per_tensor"] > 0
        assert r["header_bytes"] > 0 and r["rss_growth_bytes"] >= 0
    for key in ("floor_ratio_at_largest", "per_tensor_largest_over_smallest", "rss_over_header_at_largest",
                "meets_targets"):
        assert key in summary
    # the checkpoint it times is one inspect reads as intended: every expert's global scales on the doctor's path
    from advisor.checkpoint.inspect import inspect_checkpoint

    folder = max((tmp_path / "ck").iterdir(), key=lambda p: int(p.name[1:]))     # n<requested size>
    info = inspect_checkpoint(str(folder))
    assert info.label == "W4A4-NVFP4" and info.totals.sizes_from == "headers", folder
    assert not [f for f in info.findings if f.severity == "error"], info.findings
