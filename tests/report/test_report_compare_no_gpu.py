"""`report --compare LIST` on a machine without a GPU: the compared GPUs are the plan (no --gpu needed)."""

from __future__ import annotations

import json

from advisor.probe import probe

from report_fixtures import DEMO, run_cli


def test_compare_without_gpu_plans_for_the_compared_gpus(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    assert not probe().devices                       # the test machine has no GPU: the case of the issue
    out = tmp_path / "r.json"
    assert run_cli(["report", DEMO, "--compare", "rtx-3090,rtx-5090", "-o", out]) == 0
    doc = json.loads(out.read_text())
    text = json.dumps(doc)
    assert "no GPU on this machine: planned for the compared GPUs" in text
    assert "RTX 3090" in text and "RTX 5090" in text


def test_no_gpu_and_no_compare_plans_the_what_if_card_and_says_so(tmp_path, capsys):
    # one behaviour for every entry point (tests/cli/test_cli_no_gpu_default.py); --gpu auto still insists
    assert run_cli(["report", DEMO, "-o", tmp_path / "r.md"]) == 0
    assert "No GPU here and no --gpu: 1 x GeForce RTX 3090 as a what-if" in (tmp_path / "r.md").read_text()
    assert run_cli(["report", DEMO, "--gpu", "auto", "-o", tmp_path / "r2.md"]) == 2
    assert "no GPU to plan for" in capsys.readouterr().err
