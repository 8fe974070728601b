"""The context cap: --context beyond the model's maximum, and the cap every engine needs when one request at the
maximum does not fit (vLLM --max-model-len)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from cost_builders import dense_checkpoint, explanation, rtx3090, vllm_plan

from advisor.cli import main
from advisor.cost import context
from advisor.cost.engine_profile import load_engine_memory
from advisor.cost.overrides import Overrides
from advisor.cost.plan import make_plan
from advisor.cost.workload import get_workload
from advisor.engines import flags as engine_flags
from launchers.engines import build_command
from launchers.settings import settings_from_plan
from cost_plan_tradeoffs import chosen_tradeoff, plan_json

VLLM = load_engine_memory("vllm")
DEMO = "demo:qwen3.6-27b-nvfp4-mixed"          # 20.4 GiB of weights, 262,144-token maximum context
DEMO_DIR = Path(__file__).resolve().parents[2] / "profiles" / "demo" / "qwen3.6-27b-nvfp4-mixed"


def _dense_plan(max_pos, workload="interactive", **wl):
    ck = dense_checkpoint("W4A16-NVFP4", max_pos=max_pos)
    w = replace(get_workload(workload), **wl) if wl else get_workload(workload)
    return ck, make_plan(ck, explanation("W4A16-NVFP4"), rtx3090(), gpus=1, workload=w, overrides=Overrides(),
                         engine_memory=VLLM)


# ---------------------------------------------------------------- --context beyond the model
def test_context_override_is_capped_at_the_model_maximum_with_a_warning():
    plan = vllm_plan(rtx3090(), ck=dense_checkpoint(max_pos=40960), context_tokens=1_000_000, prompt_tokens=500_000)
    assert plan.predictions.decode_context_tokens == 40960
    assert any("--context 1,000,000" in w and "40,960" in w for w in plan.warnings)
    assert any("--prompt 500,000" in w for w in plan.warnings)


# ---------------------------------------------------------------- the context cap
def test_vllm_plan_and_launch_cap_the_context_the_kv_pool_holds(capsys, tmp_path):
    doc = plan_json(capsys, DEMO, "--gpu", "rtx-3090", "--engine", "vllm")
    rec, preds, w = doc["recommendation"], doc["predictions"], doc["workload"]
    # the model's maximum does not fit one request; the workload's context does: that is the cap
    assert preds["max_context_per_request"] < 262_144
    assert preds["max_context_per_request"] >= w["context_tokens"]
    assert rec["max_model_len"] == w["context_tokens"]
    assert rec["flags"]["--max-model-len"] == str(w["context_tokens"])
    assert chosen_tradeoff(doc, "max_model_len")["value"] == str(w["context_tokens"])
    path = tmp_path / "p.json"
    path.write_text(json.dumps(doc))
    assert main(["launch", str(DEMO_DIR), "--engine", "vllm", "--gpu", "rtx-3090", "--plan", str(path),
                 "--dry-run", "--json"]) == 0
    argv = json.loads(capsys.readouterr().out)["command"]["argv"]
    pairs = dict(zip(argv, argv[1:]))
    assert pairs["--max-model-len"] == str(w["context_tokens"])
    for flag, value in rec["flags"].items():          # plan's flag line == launch --plan
        assert pairs[flag] == value, flag


def test_cap_is_the_largest_fitting_context_when_the_workload_does_not_fit():
    ck, plan = _dense_plan(1_000_000, context_tokens=900_000, prompt_tokens=890_000)
    rec = plan.recommendation
    ctx = context.build(ck, explanation("W4A16-NVFP4"), rtx3090(), gpus=1, engine=VLLM, overrides=Overrides())
    s = context.Settings(ctx.engine.kv_dtype(rec.kv_cache_dtype), rec.max_batch, rec.memory_share,
                         rec.chunked_prefill, rec.tp, rec.draft_tokens, rec.cuda_graphs)
    one = ctx.max_context(s, 1)
    assert 4096 < one < 900_000
    assert rec.max_model_len is not None and rec.max_model_len % 1024 == 0
    assert rec.max_model_len <= one < rec.max_model_len + 1024
    assert rec.flags["--max-model-len"] == str(rec.max_model_len)
    assert "refused" in next(o.note for o in plan.tradeoffs if o.knob == "max_model_len")


def test_no_cap_when_the_model_maximum_fits():
    _, small = _dense_plan(8192, context_tokens=4096, prompt_tokens=2048)
    assert small.recommendation.max_model_len is None
    assert "--max-model-len" not in small.recommendation.flags
    assert not any(o.knob == "max_model_len" for o in small.tradeoffs)
    _, big = _dense_plan(10_000_000)                  # same model, a maximum no pool holds
    assert big.recommendation.max_model_len == get_workload("interactive").context_tokens


@pytest.mark.parametrize("engine,flag", [("vllm", "--max-model-len"), ("sglang", "--context-length"),
                                         ("fastllm", "--max_context_length")])
def test_every_engine_spells_the_cap_from_the_plan(engine, flag):
    assert engine_flags.context_args(engine, 20480) == [flag, "20480"]
    assert engine_flags.context_args(engine, None) == []
    rec = {"kv_cache_dtype": "auto", "max_batch": 1, "memory_share": 0.9, "chunked_prefill": 2048, "tp": 1,
           "max_model_len": 20480}
    s = settings_from_plan({"recommendation": rec}, engine=engine, model="/m")
    assert s.max_model_len == 20480
    argv = build_command(s).argv
    assert argv[argv.index(flag) + 1] == "20480"
