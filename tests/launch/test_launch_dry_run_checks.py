"""A dry run prints what explain predicts about the command; demos (no weights) never start."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from advisor.checkpoint.demo import demo_path
from advisor.cli import main


def _copy_demo(tmp_path: Path, name: str) -> Path:
    dst = tmp_path / name
    shutil.copytree(demo_path(name), dst)
    return dst


def test_dry_run_carries_explains_failure_prediction(tmp_path, capsys):
    ckpt = _copy_demo(tmp_path, "qwen3-8b-nvfp4")            # declares an FP8 KV cache
    # --kv-cache-dtype auto: the engine default (the checkpoint's FP8 KV), which sm_75 attention rejects
    rc = main(["launch", str(ckpt), "--engine", "vllm", "--gpu", "rtx-2080-ti", "--kv-cache-dtype", "auto",
               "--dry-run", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0 and out["dry_run"] is True
    assert any("will not run" in w and "float16" in w for w in out["warnings"]), out["warnings"]
    # the tuned command (no KV flag given) stores the KV cache in a dtype that runs: nothing to warn about
    assert main(["launch", str(ckpt), "--engine", "vllm", "--gpu", "rtx-2080-ti", "--dry-run", "--json"]) == 0
    tuned = json.loads(capsys.readouterr().out)
    assert tuned["tuning"]["tuned"] is True and tuned["warnings"] == []


def test_dry_run_has_no_warning_where_explain_says_it_runs(tmp_path, capsys):
    ckpt = _copy_demo(tmp_path, "qwen3-8b-nvfp4")
    assert main(["launch", str(ckpt), "--engine", "vllm", "--gpu", "rtx-3090", "--dry-run", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["warnings"] == []


def test_dry_run_without_gpu_says_the_prediction_was_skipped(tmp_path, capsys):
    ckpt = _copy_demo(tmp_path, "qwen3-8b-nvfp4")
    assert main(["launch", str(ckpt), "--engine", "vllm", "--dry-run", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert any("--gpu" in n for n in out["notes"])


def test_demo_is_refused_for_a_real_launch_and_flagged_in_a_dry_run(capsys):
    assert main(["launch", "demo:qwen3-8b-nvfp4", "--engine", "vllm"]) == 3
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "demo:qwen3-8b-nvfp4" in err[0] and "no weights" in err[0]
    assert main(["launch", "demo:qwen3-8b-nvfp4", "--engine", "vllm", "--dry-run", "--json"]) == 0
    assert any("configs only" in w for w in json.loads(capsys.readouterr().out)["warnings"])


def test_a_plan_without_a_launch_line_is_refused(tmp_path, capsys):
    assert main(["plan", "demo:qwen3-30b-a3b-fp8", "--gpu", "rtx-3090", "--json"]) == 0
    plan = tmp_path / "plan.json"
    plan.write_text(capsys.readouterr().out)
    assert json.loads(plan.read_text())["recommendation"]["blocked"]
    ckpt = _copy_demo(tmp_path, "qwen3-30b-a3b-fp8")
    assert main(["launch", str(ckpt), "--engine", "vllm", "--plan", str(plan), "--dry-run"]) == 4
    err = capsys.readouterr().err
    assert "no launch line" in err and "need at least 2" in err


def test_a_profile_never_stores_a_secret_extra_arg(tmp_path, capsys):
    ckpt = _copy_demo(tmp_path, "qwen3-8b-nvfp4")
    rc = main(["launch", str(ckpt), "--engine", "vllm", "--dry-run", "--extra-arg=--api-key=SECRET123",
               "--save-profile", "p1"])
    assert rc == 3 and "--api-key-env" in capsys.readouterr().err
    from launchers import profiles

    assert "p1" not in profiles.list_names()
