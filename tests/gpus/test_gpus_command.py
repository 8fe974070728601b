"""`nvfp4-advisor gpus` through the real CLI entry point."""

from __future__ import annotations

import json

import pytest

from advisor.cli import main
from advisor.errors import EXIT_USAGE
from advisor.gpu_spec import PEAK_KEYS


def run_json(capsys, *args):
    rc = main(["gpus", "--json", *args])
    out = capsys.readouterr().out
    return rc, json.loads(out)


def test_json_lists_every_gpu_and_field(capsys, table):
    rc, doc = run_json(capsys)
    assert rc == 0
    assert doc["schema_version"] and doc["kind"] == "gpus"
    assert doc["count"] == len(doc["gpus"]) == len(table) >= 35
    by_id = {g["id"]: g for g in doc["gpus"]}
    g = by_id["h100-sxm"]
    for key in ("name", "aliases", "pci_device_ids", "segment", "arch", "cc", "sm_count", "boost_clock_mhz",
                "tensor_peak_clock_mhz", "memory_gb", "memory_type", "bandwidth_gbs", "l2_mb", "tdp_w",
                "nvlink_gbs", "pcie_gen", "pcie_lanes", "peaks", "derived_fields", "halved_from_sparse",
                "confidence", "sources", "notes"):
        assert key in g, key
    assert g["cc"] == "9.0" and g["tensor_peak_clock_mhz"] == 1830
    assert set(g["peaks"]) == set(PEAK_KEYS)
    # "not-supported" and null stay distinct
    assert by_id["rtx-3090"]["peaks"]["fp8_fp32acc"] == "not-supported"
    assert by_id["l40s"]["peaks"]["int4"] is None
    assert by_id["h100-sxm"]["peaks"]["int4"] == "not-supported"
    # sources used by the listed GPUs come with their titles
    used = {k for g in doc["gpus"] for k in g["sources"]}
    assert used == set(doc["sources"])
    assert all(v["title"] for v in doc["sources"].values())


@pytest.mark.parametrize("args,check", [
    (["--arch", "ada"], lambda g: g["arch"] == "ada"),
    (["--cc-min", "10.0"], lambda g: tuple(map(int, g["cc"].split("."))) >= (10, 0)),
    (["--cc-max", "8.6"], lambda g: tuple(map(int, g["cc"].split("."))) <= (8, 6)),
    (["--segment", "workstation"], lambda g: g["segment"] == "workstation"),
])
def test_filters(capsys, table, args, check):
    rc, doc = run_json(capsys, *args)
    assert rc == 0 and doc["gpus"]
    assert all(check(g) for g in doc["gpus"])
    assert len(doc["gpus"]) < len(table)


def test_filters_combine(capsys):
    rc, doc = run_json(capsys, "--arch", "blackwell", "--cc-min", "12.0", "--segment", "consumer")
    assert rc == 0
    assert {g["id"] for g in doc["gpus"]} == {"rtx-5070-ti", "rtx-5080", "rtx-5090"}
    assert doc["filters"] == {"arch": "blackwell", "cc_min": "12.0", "cc_max": None, "segment": "consumer"}


def test_no_match_is_not_an_error(capsys):
    rc, doc = run_json(capsys, "--arch", "turing", "--cc-min", "9.0")
    assert rc == 0 and doc["count"] == 0 and doc["gpus"] == []


@pytest.mark.parametrize("args", [["--arch", "volta"], ["--cc-min", "new"], ["--segment", "gaming"]])
def test_bad_filter_is_a_usage_error(capsys, args):
    rc = main(["gpus", "--json", *args])
    captured = capsys.readouterr()
    assert rc == EXIT_USAGE
    assert json.loads(captured.out)["kind"] == "error"
    assert "Traceback" not in captured.err and captured.err.count("\n") == 1


def test_human_table(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    rc = main(["gpus", "--arch", "hopper"])
    out = capsys.readouterr().out
    assert rc == 0
    assert "h100-sxm" in out and "gh200" in out and "rtx-4090" not in out
    assert "n/s" in out          # Hopper INT4 / FP4
    assert "‡" in out            # H100 PCIe figures halved from sparse
    assert "None" not in out
