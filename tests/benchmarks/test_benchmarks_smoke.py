"""Every benchmark script runs in its smoke mode (`--smoke`: tiny sizes, one run, no targets), in a
fresh interpreter, and exits 0: a script that imports a removed name, or whose code no longer
runs, fails CI instead of rotting until someone needs its figures. The scripts are globbed, so a
new one is covered (and must accept --smoke) from the day it lands."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT

SCRIPTS = sorted((ROOT / "benchmarks").glob("*.py"))
TIMEOUT_S = 600


def test_the_glob_finds_the_scripts():
    names = {p.name for p in SCRIPTS}
    assert {"plan_speed.py", "convert_speed.py", "kernel_sass.py"} <= names


@pytest.mark.parametrize("script", SCRIPTS, ids=[p.stem for p in SCRIPTS])
def test_benchmark_runs_in_smoke_mode(script, tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}   # kernels/ tests set it
    env["TMPDIR"] = str(tmp_path)                 # whatever a script leaves behind goes with the test
    try:
        proc = subprocess.run([sys.executable, str(script), "--smoke"], cwd=ROOT, env=env, stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        pytest.fail(f"{script.name} --smoke ran past {TIMEOUT_S} s:\n{out[-2000:]}")
    out = (proc.stdout + proc.stderr)[-4000:]
    assert proc.returncode == 0, f"{script.name} --smoke exited {proc.returncode}:\n{out}"
    assert proc.stdout.strip(), f"{script.name} --smoke printed nothing:\n{out}"
