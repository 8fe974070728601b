"""One command, one answer: `launch --dry-run` with a known GPU prints the command the TUI's Launch tab
and the report show (tuned by the same plan), for every engine with rules; without a known GPU it says
"Untuned" and how to tune; explicit flags still win over the tuned values."""

from __future__ import annotations

import json

import pytest

from advisor.services.analysis import Selection, analyze
from advisor.cli import main
from advisor.probe import probe
from advisor.tui import actions

DEMO = "demo:qwen3-8b-nvfp4"


def _dry_run(capsys, *args: str) -> dict:
    assert main(["launch", DEMO, *args, "--dry-run", "--json"]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("engine", ["vllm", "sglang", "fastllm"])
@pytest.mark.parametrize("gpu", ["rtx-3090", "rtx-5090"])
def test_dry_run_is_the_tuis_tuned_command(engine, gpu, capsys):
    out = _dry_run(capsys, "--engine", engine, "--gpu", gpu)
    assert out["tuning"]["tuned"] is True and out["tuning"]["workload"] == "interactive"
    a = analyze(Selection(DEMO, gpu, engine=engine))
    tui = actions.generated_command(a, engine)
    assert out["command"]["argv"] == list(tui.argv)
    rec = a.plan.recommendation
    if rec.max_batch:                    # the plan's settings really are in it, not engine defaults
        assert str(rec.max_batch) in out["command"]["argv"]


def test_the_same_spelling_of_the_gpu_tunes_the_same(capsys):
    assert _dry_run(capsys, "--engine", "vllm", "--gpu", "RTX3090")["command"]["argv"] == \
        _dry_run(capsys, "--engine", "vllm", "--gpu", "rtx-3090")["command"]["argv"]


def test_explicit_flags_win_over_the_tuned_values(capsys):
    out = _dry_run(capsys, "--engine", "vllm", "--gpu", "rtx-3090", "--kv-cache-dtype", "auto", "--max-batch", "7")
    argv = out["command"]["argv"]
    assert argv[argv.index("--kv-cache-dtype") + 1] == "auto"
    assert argv[argv.index("--max-num-seqs") + 1] == "7"
    assert "--gpu-memory-utilization" in argv          # the rest stays tuned


def test_workload_is_tuned_for(capsys):
    out = _dry_run(capsys, "--engine", "vllm", "--gpu", "rtx-3090", "--workload", "batch")
    a = analyze(Selection(DEMO, "rtx-3090", workload="batch"))
    assert out["tuning"]["workload"] == "batch"
    assert out["command"]["argv"] == list(actions.generated_command(a, "vllm").argv)


@pytest.mark.skipif(bool(probe().devices), reason="this machine has a GPU: the probed card is known")
def test_without_a_known_gpu_it_says_untuned_and_how_to_tune(capsys):
    out = _dry_run(capsys, "--engine", "vllm")
    assert out["tuning"] == {"tuned": False, "why": "no GPU named and none found here"}
    assert _dry_run(capsys, "--engine", "vllm", "--gpu", "auto")["tuning"]["tuned"] is False
    assert "--gpu-memory-utilization" not in out["command"]["argv"]
    assert main(["launch", DEMO, "--engine", "vllm", "--dry-run"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "Untuned: no GPU named and none found here" in text and "add --gpu ID" in text and "--plan PLAN.json" in text


def test_engine_without_rules_is_untuned_and_says_why(capsys):
    out = _dry_run(capsys, "--engine", "llamacpp", "--gpu", "rtx-3090")
    assert out["tuning"]["tuned"] is False and "no llamacpp rules" in out["tuning"]["why"]


def test_a_bad_gpu_id_is_still_a_usage_error(capsys):
    assert main(["launch", DEMO, "--engine", "vllm", "--gpu", "rtx-9999", "--dry-run"]) == 2
    assert "unknown GPU 'rtx-9999'" in capsys.readouterr().err
