"""The memory share: SGLang raises --mem-fraction-static when the weights fit only then, and keeps a fixed one."""

from __future__ import annotations

import json
from pathlib import Path

from advisor.cli import main
from advisor.cost import memory
from cost_plan_tradeoffs import chosen_tradeoff, plan_json, tradeoff_rows

DEMO = "demo:qwen3.6-27b-nvfp4-mixed"          # 20.4 GiB of weights, 262,144-token maximum context
DEMO_DIR = Path(__file__).resolve().parents[2] / "profiles" / "demo" / "qwen3.6-27b-nvfp4-mixed"


def test_sglang_raises_mem_fraction_static_when_the_weights_fit_only_then(capsys, tmp_path):
    doc = plan_json(capsys, DEMO, "--gpu", "rtx-3090", "--engine", "sglang")
    rec, preds, w = doc["recommendation"], doc["predictions"], doc["workload"]
    assert rec["blocked"] == "" and preds["decode_tok_s"] > 0
    assert rec["memory_share"] == 0.95 and rec["flags"]["--mem-fraction-static"] == "0.95"
    default = [o for o in tradeoff_rows(doc, "memory_share") if not o["chosen"]]
    assert len(default) == 1 and float(default[0]["value"]) < 0.95
    assert "raised" in chosen_tradeoff(doc, "memory_share")["note"]
    assert preds["max_context_per_request"] >= w["context_tokens"]
    assert not any("do not fit in 1 x" in x for x in doc["warnings"])
    # the activations of the chosen chunk still fit outside the share (SGLang keeps them there)
    from advisor.checkpoint.inspect import inspect_checkpoint

    arch = inspect_checkpoint(str(DEMO_DIR)).arch
    vram = 24 * 2**30
    act = memory.activation_bytes(arch, rec["chunked_prefill"], rec["max_batch"], rec["tp"]).value
    assert act <= vram * (1 - rec["memory_share"])
    # ... and the launch line carries the same share and context cap
    assert rec["flags"]["--context-length"] == str(rec["max_model_len"])
    path = tmp_path / "p.json"
    path.write_text(json.dumps(doc))
    assert main(["launch", str(DEMO_DIR), "--engine", "sglang", "--gpu", "rtx-3090", "--plan", str(path),
                 "--dry-run", "--json"]) == 0
    argv = json.loads(capsys.readouterr().out)["command"]["argv"]
    pairs = dict(zip(argv, argv[1:]))
    for flag, value in rec["flags"].items():
        assert pairs[flag] == value, flag


def test_sglang_keeps_a_fixed_share(capsys):
    doc = plan_json(capsys, DEMO, "--gpu", "rtx-3090", "--engine", "sglang", "--memory-share", "0.8")
    assert doc["recommendation"]["memory_share"] == 0.8
    assert doc["recommendation"]["blocked"]            # 24 GiB x 0.8 does not hold 20.4 GiB of weights
