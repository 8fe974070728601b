"""benchmarks/microbench_gpu.py end to end on the CPU interpreter (device boundary faked)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "microbench_gpu.py"


def _load():
    spec = importlib.util.spec_from_file_location("microbench_gpu", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_script_without_gpu_exits_0(capsys):
    assert _load().main([]) == 0
    assert capsys.readouterr().out.startswith("No GPU benchmark:")


@pytest.fixture
def fake_gpu(monkeypatch):
    from advisor.services import microbench as cmd
    from advisor.microbench import runner

    dev = runner.Device("Fake GPU 9000", "GPU-fake-0002", (8, 0), 2, 4096, 1 << 18, "cpu", ((32, 128), (2, 16)))
    monkeypatch.setattr(cmd, "gpu_unavailable", lambda: None)
    monkeypatch.setattr(runner, "cuda_device", lambda index=0: dev)
    monkeypatch.setattr(runner, "CudaTimer", runner.WallTimer)
    return dev


def test_script_prints_the_short_table_last_and_writes_json(fake_gpu, tmp_path, capsys):
    out = tmp_path / "mb.json"
    assert _load().main(["--shape", "128x40", "--m", "1", "--json", str(out)]) == 0
    lines = capsys.readouterr().out.rstrip().splitlines()
    assert lines[-5].split() == ["kernel", "KxN", "M", "path", "us", "GB/s", "%copyBW", "TFLOPS", "%peak"]
    assert [line.split()[0] for line in lines[-4:]] == ["bf16", "w4a16_nvfp4", "w8a16_fp8", "w4a16_int4"]
    doc = json.loads(out.read_text())
    assert doc["kind"] == "microbench" and doc["calibration"]["uuid"] == "GPU-fake-0002"
    assert Path(doc["calibration_path"]).is_file()
