"""The plan's flag line holds every setting the launcher passes (speculation, eager mode)."""

from __future__ import annotations

import json

from advisor.cli import main

def run_json(capsys, *argv):
    code = main(["plan", *argv, "--json"])
    return code, json.loads(capsys.readouterr().out)


def test_flag_line_carries_speculation_and_eager_mode_like_the_launcher(capsys):
    from launchers.engines import build_command
    from launchers.settings import settings_from_plan

    _, doc = run_json(capsys, "demo:qwen3.6-27b-nvfp4-mixed", "--gpu", "rtx-5090")
    r = doc["recommendation"]
    assert r["draft_tokens"] > 0 and r["speculative_method"]
    cfg = json.loads(r["flags"]["--speculative-config"])
    assert cfg["num_speculative_tokens"] == r["draft_tokens"]
    argv = build_command(settings_from_plan(doc, engine="vllm", model="/m")).argv
    assert argv[argv.index("--speculative-config") + 1] == r["flags"]["--speculative-config"]
    _, eager = run_json(capsys, "demo:qwen3-8b-nvfp4", "--gpu", "rtx-3090", "--no-cuda-graphs")
    assert "--enforce-eager" in eager["recommendation"]["flags"]
