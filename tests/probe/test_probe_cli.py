"""`nvfp4-advisor probe` end to end through advisor.cli.main, with NVML replaced by snapshots."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from advisor.cli import main

ROOT = Path(__file__).resolve().parents[2]


def _json(capsys) -> dict:
    return json.loads(capsys.readouterr().out)


def test_probe_json_2080ti_pair(install_nvml, capsys):
    install_nvml("rtx2080ti_x2_nvlink")
    assert main(["probe", "--json"]) == 0
    doc = _json(capsys)
    assert doc["schema_version"] and doc["kind"] == "probe" and doc["selection"] is None
    p = doc["probe"]
    assert p["status"] == "ok" and len(p["devices"]) == 2
    dev = p["devices"][0]
    assert dev["spec"]["id"] == "rtx-2080-ti" and dev["match"] == "pci-id"
    assert dev["spec"]["peaks"]["bf16"] == "not-supported"
    assert dev["bandwidth"]["gbs"] == 616.0 and "x 2" in dev["bandwidth"]["formula"]
    assert dev["capabilities"]["FP8 tensor cores"] == "no (needs sm_89+)"
    assert dev["nvml"]["pci_device_id"] == "0x1E07"
    assert {"field": "mig_mode", "query": "nvmlDeviceGetMigMode", "error": "NVMLError_NotSupported",
            "message": "Not Supported"} in dev["nvml"]["failures"]
    assert p["topology"][0]["description"] == "NVLink x2" and p["topology"][0]["nvlink_links"] == 2
    assert p["processes"][0]["name"] == "python3"


def test_probe_human_output_unknown_card(install_nvml, capsys):
    install_nvml("unknown_future")
    assert main(["probe"]) == 0
    out = capsys.readouterr().out
    assert "NVIDIA GeForce RTX 6090" in out and "not in the table: derived from NVML" in out
    assert "FP4 tensor cores" in out and "derived" in out
    assert "None" not in out


def test_probe_human_output_mig_and_na(install_nvml, capsys):
    install_nvml("a100_mig")
    assert main(["probe"]) == 0
    out = capsys.readouterr().out
    assert "MIG devices on GPU 0" in out and "MIG-" in out
    assert "N/A (Not Supported)" in out            # utilisation is not reported in MIG mode


@pytest.mark.parametrize("snapshot", ["no_driver", "driver_not_loaded"])
def test_no_driver_exit_0_one_line(install_nvml, capsys, snapshot):
    install_nvml(snapshot)
    assert main(["probe"]) == 0
    out = capsys.readouterr().out
    lines = [line for line in out.splitlines() if line.strip()]
    assert lines[0] == "GPU probe"
    assert lines[1].startswith("No NVIDIA driver found (") and lines[1].endswith(").")
    assert lines[2].startswith("What-if:") and "--gpu ID [--gpus N]" in lines[2]
    assert len(lines) == 3


def test_no_driver_json(install_nvml, capsys):
    install_nvml("no_driver")
    assert main(["probe", "--json"]) == 0
    p = _json(capsys)["probe"]
    assert p["status"] == "no-driver" and p["devices"] == [] and "no NVIDIA driver" in p["message"]


def test_what_if_without_driver(install_nvml, capsys):
    install_nvml("no_driver")
    assert main(["probe", "--gpu", "rtx-3090", "--gpus", "2", "--json"]) == 0
    sel = _json(capsys)["selection"]
    assert sel["spec"]["id"] == "rtx-3090" and sel["count"] == 2 and sel["source"] == "what-if"
    assert sel["capabilities"]["FP8 tensor cores"] == "no (needs sm_89+)"
    assert main(["probe", "--gpu", "rtx-3090", "--gpus", "2"]) == 0
    out = capsys.readouterr().out
    assert "Planning set" in out and "what-if: 2 x GeForce RTX 3090" in out


def test_gpu_id_present_in_box_is_probed(install_nvml, capsys):
    install_nvml("rtx2080ti_22gb_modded")
    assert main(["probe", "--gpu", "rtx-2080-ti", "--json"]) == 0
    sel = _json(capsys)["selection"]
    assert sel["source"] == "probed" and sel["spec"]["memory_gb"] == 22.0 and sel["devices"] == [0]


def test_bad_gpu_id_exit_2_one_line(install_nvml, capsys):
    install_nvml("no_driver")
    assert main(["probe", "--gpu", "rtx-9999"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("nvfp4-advisor: error: unknown GPU 'rtx-9999'")


def test_bad_gpu_count_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["probe", "--gpu", "rtx-3090", "--gpus", "0"])
    assert exc.value.code == 2
    assert "need at least 1 GPU" in capsys.readouterr().err


def test_probe_json_does_not_import_torch(tmp_path):
    """`probe --json` is on the TUI's cold path: no torch, no textual, no rich."""
    code = (
        "import sys, io, contextlib\n"
        "from advisor.cli import main\n"
        "buf = io.StringIO()\n"
        "with contextlib.redirect_stdout(buf):\n"
        "    rc = main(['probe', '--json'])\n"
        "assert rc == 0, rc\n"
        "bad = [m for m in ('torch', 'triton', 'textual', 'rich') if m in sys.modules]\n"
        "assert not bad, bad\n"
        "print(buf.getvalue())\n"
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                          cwd=tmp_path, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["kind"] == "probe"
