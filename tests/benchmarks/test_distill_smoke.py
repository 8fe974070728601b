"""benchmarks/distill_aiconfigurator.py --smoke reads the shipped calibration tables without pandas or
aiconfigurator and fails when a row no longer names the measured file it came from."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

from advisor.cost import measured_tables as mt
from tests.conftest import ROOT

SCRIPT = ROOT / "benchmarks" / "distill_aiconfigurator.py"


def _smoke(folder) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), "--smoke", "--out", str(folder)], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)


def test_shipped_tables_pass_and_every_file_is_listed():
    run = _smoke(mt.calibration_dir())
    assert run.returncode == 0, run.stdout + run.stderr
    for name in mt.FILES:
        assert f"{name}.json:" in run.stdout
    assert "linear_attention" in run.stdout and "elementwise" in run.stdout
    assert ", mamba2 " in run.stdout and ", mamba2 0," not in run.stdout


def test_a_row_without_its_source_fails(tmp_path):
    folder = tmp_path / "cal"
    shutil.copytree(mt.calibration_dir(), folder)
    path = folder / "linear_attention.json"
    data = json.loads(path.read_text())
    data["linear_attention"][0]["src"] = "somewhere else"
    path.write_text(json.dumps(data))
    run = _smoke(folder)
    assert run.returncode == 1 and "PROBLEM linear_attention.json row 0" in run.stdout


def test_a_mamba2_row_from_another_table_fails(tmp_path):
    """A Mamba2 row must come from mamba2_perf (and a GDN row from gdn_perf): the kinds never mix."""
    folder = tmp_path / "cal"
    shutil.copytree(mt.calibration_dir(), folder)
    path = folder / "linear_attention.json"
    data = json.loads(path.read_text())
    rows = data["linear_attention"]
    i = next(i for i, r in enumerate(rows) if r["kind"] == "mamba2")
    rows[i]["src"] = rows[i]["src"].replace("mamba2_perf", "gdn_perf")
    path.write_text(json.dumps(data))
    run = _smoke(folder)
    assert run.returncode == 1 and f"PROBLEM linear_attention.json row {i}: kind 'mamba2'" in run.stdout


def test_every_row_comes_from_an_operator_table_never_a_serving_run():
    """Calibration is distilled from AIConfigurator's measured operator tables only; its end-to-end serving
    results (systems/silicon_sample.csv, systems/support_matrix/) are kept for independent checks."""
    import re

    srcs = []
    for name in mt.FILES:
        data = json.loads((mt.calibration_dir() / f"{name}.json").read_text())
        for rows in data.values():
            if isinstance(rows, list):
                srcs += [r["src"] for r in rows if isinstance(r, dict) and "src" in r]
    assert srcs
    for src in srcs:
        assert "silicon_sample" not in src and "support_matrix" not in src, src
        assert re.search(r"aiconfigurator_core/systems/data/[^ ]+_perf\.parquet", src), src
