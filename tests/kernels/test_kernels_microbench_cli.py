"""`nvfp4-advisor microbench` end to end: no-GPU line + exit 0, and the whole suite on the CPU
interpreter with only the device boundary faked (CUDA device info and event timer)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from advisor.cli import main


def test_without_a_gpu_says_so_in_one_line_and_exits_0(capsys):
    assert main(["microbench"]) == 0
    out = capsys.readouterr().out.strip()
    assert out.startswith("No GPU benchmark:") and "nothing measured" in out
    assert len(out.splitlines()) <= 2          # one paragraph (Rich may wrap a narrow terminal)


def test_without_a_gpu_json(capsys):
    assert main(["microbench", "--json", "--m", "1,16"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["kind"] == "microbench" and doc["available"] is False and doc["results"] == []
    assert "CUDA" in doc["reason"] and doc["schema_version"]


def test_without_torch(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "torch", None)          # `import torch` -> ImportError
    assert main(["microbench", "--json"]) == 0
    assert "torch not installed" in json.loads(capsys.readouterr().out)["reason"]


def test_bad_m_is_a_usage_error(capsys):
    assert main(["microbench", "--m", "1,x"]) == 2
    assert "--m" in capsys.readouterr().err


def test_command_module_and_help_do_not_import_torch():
    code = ("import sys, advisor.commands.microbench as m, advisor.microbench.results, "
            "advisor.microbench.shapes, advisor.microbench.configs, advisor.calibration; "
            "assert 'torch' not in sys.modules and 'triton' not in sys.modules, 'heavy import'")
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.fixture
def fake_gpu(monkeypatch):
    """A 'GPU' that is the CPU interpreter: real kernels, real harness, wall-clock timer."""
    from advisor.commands import microbench as cmd
    from advisor.microbench import runner, shapes

    # small check shapes for the interpreter: one ragged, one even (the 32/64-wide GEMV tiles unmasked)
    dev = runner.Device("Fake GPU 9000", "GPU-fake-0001", (8, 6), 2, 4096, 1 << 18, "cpu", ((40, 128), (64, 128)),
                        (1, 16))
    monkeypatch.setattr(cmd, "gpu_unavailable", lambda: None)
    monkeypatch.setattr(runner, "cuda_device", lambda index=0: dev)
    monkeypatch.setattr(runner, "CudaTimer", runner.WallTimer)
    monkeypatch.setattr(shapes, "default_shapes", lambda: (shapes.Shape(128, 40),))
    return dev


def test_suite_runs_every_class_and_saves_the_calibration(fake_gpu, capsys):
    from advisor.calibration import load_calibration

    assert main(["microbench", "--json", "--m", "1,20"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["available"] is True
    rows = doc["suite"]["results"]
    assert {(r["kernel"], r["m"]) for r in rows} == {(c, m) for c in ("bf16", "w4a16_nvfp4", "w8a16_fp8",
                                                                      "w4a16_int4") for m in (1, 20)}
    assert all(r["skipped"] is None and r["time_us"] > 0 and r["gbs"] > 0 for r in rows), rows
    assert {r["path"] for r in rows if r["m"] == 20 and r["kernel"] != "bf16"} == {"gemm"}
    assert doc["suite"]["notes"] == []                       # every class verified against torch
    cal = load_calibration(doc["calibration"]["gpu_id"], "GPU-fake-0001")
    assert cal is not None and cal.name == "Fake GPU 9000" and cal.shape == (128, 40)
    assert set(cal.kernel_bandwidth_eff) == {"bf16", "w4a16_nvfp4", "w8a16_fp8", "w4a16_int4"}
    assert doc["calibration_path"].endswith(".json")


def test_spent_budget_skips_cases_and_no_save_writes_nothing(fake_gpu, capsys, tmp_path):
    assert main(["microbench", "--json", "--m", "1", "--budget", "0", "--no-save"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert {r["skipped"] for r in doc["suite"]["results"]} == {"time budget spent"}
    assert doc["calibration_path"] is None
    assert not (tmp_path / "xdg-data").exists()


def test_human_output_is_a_table(fake_gpu, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "220")                     # Rich folds columns on narrow terminals
    assert main(["microbench", "--m", "1", "--budget", "0", "--no-save"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Microbenchmarks on Fake GPU 9000") and "kernel" in out and "w4a16_nvf" in out


def test_wrong_results_are_reported_not_timed(fake_gpu, monkeypatch):
    from advisor.microbench import runner
    from kernels import formats

    real = formats.reference_dequantize
    monkeypatch.setattr(formats, "reference_dequantize",
                        lambda w: real(w) * (2.0 if w.fmt == "fp8" else 1.0))
    suite = runner.run_suite((runner.Shape(128, 40),), (1,), dev=fake_gpu, timer=runner.WallTimer(),
                             classes=("w8a16_fp8", "w4a16_nvfp4"))
    fp8, nvfp4 = suite.results
    assert fp8.skipped and "wrong result" in fp8.skipped and fp8.time_us is None
    assert nvfp4.skipped is None and nvfp4.time_us
    assert any(n.startswith("w8a16_fp8: skipped, wrong result") for n in suite.notes)
