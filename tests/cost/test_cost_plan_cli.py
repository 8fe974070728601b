"""`nvfp4-advisor plan` end to end on the bundled demo checkpoints (real inspect + explain)."""

from __future__ import annotations

import json

import pytest

from advisor.cli import main

CONTRACT = ("decode_tok_s", "decode_aggregate_tok_s", "prefill_tok_s", "prefill_seconds", "kv_pool_tokens",
            "max_context_per_request", "bound", "speculative")
RECOMMENDATION = ("kv_cache_dtype", "max_batch", "draft_tokens", "memory_share", "chunked_prefill", "tp")


def run_json(capsys, *argv):
    code = main(["plan", *argv, "--json"])
    out = capsys.readouterr().out
    return code, json.loads(out)


def test_plan_json_contract(capsys):
    code, doc = run_json(capsys, "demo:qwen3-8b-nvfp4", "--gpu", "rtx-3090", "--workload", "agents")
    assert code == 0
    assert doc["schema_version"] and doc["kind"] == "plan"
    pred = doc["predictions"]
    assert all(k in pred for k in CONTRACT)
    assert all(k in doc["recommendation"] for k in RECOMMENDATION)
    assert pred["bound"] in ("bandwidth", "compute")
    assert pred["decode_tok_s"] > 0 and pred["prefill_seconds"] > 0
    assert all(isinstance(v, (int, float)) for v in pred["decode_aggregate_tok_s"].values())
    assert doc["recommendation"]["kv_cache_dtype"] in pred["kv_pool_tokens"]
    assert doc["assumptions"] and all(a["source"] for a in doc["assumptions"])
    assert {"formula", "inputs", "source"} <= set(doc["derivations"]["decode_tok_s"])
    # an NVFP4 W4A4 checkpoint on Ampere is costed as the W4A16 path explain chose
    assert "W4A16" in doc["explanation_summary"] or "weight-only" in doc["explanation_summary"].lower() \
        or "Marlin" in doc["explanation_summary"]


def test_plan_respects_explain_kv_rejections(capsys):
    # SM86 + FA2 cannot read FP8 KV in vLLM's FLASH_ATTN; FlashInfer can. Whatever explain rejects
    # must not be recommended.
    code, doc = run_json(capsys, "demo:qwen3-8b-nvfp4", "--gpu", "rtx-3090", "--workload", "long-context")
    rejected = {o["value"] for o in doc["tradeoffs"] if o["knob"] == "kv_cache_dtype" and "rejected" in o["note"]}
    assert doc["recommendation"]["kv_cache_dtype"] not in rejected
    assert not rejected & set(doc["predictions"]["kv_pool_tokens"])


def test_what_if_vram_and_fixed_settings(capsys):
    _, small = run_json(capsys, "demo:qwen3-8b-nvfp4", "--gpu", "rtx-2080-ti", "--kv-cache-dtype", "bfloat16")
    _, modded = run_json(capsys, "demo:qwen3-8b-nvfp4", "--gpu", "rtx-2080-ti", "--vram", "22",
                         "--kv-cache-dtype", "bfloat16", "--max-batch", "2")
    assert modded["predictions"]["kv_pool_tokens"]["bfloat16"] > small["predictions"]["kv_pool_tokens"]["bfloat16"]
    assert modded["recommendation"]["max_batch"] == 2
    assert modded["recommendation"]["kv_cache_dtype"] == "bfloat16"


def test_bad_inputs_are_one_line(capsys):
    assert main(["plan", "demo:qwen3-8b-nvfp4", "--gpu", "rtx-3090", "--workload", "nope"]) == 3
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "unknown workload" in err
    assert main(["plan", "demo:qwen3-8b-nvfp4", "--gpu", "rtx-3090", "--memory-share", "1.5"]) == 2
    assert "memory-share" in capsys.readouterr().err


def test_human_output_renders(capsys):
    assert main(["plan", "demo:qwen3-30b-a3b-nvfp4", "--gpu", "rtx-3090", "--gpus", "2", "--workload", "batch"]) == 0
    out = capsys.readouterr().out
    assert "Recommendation" in out and "Trade-offs considered" in out and "Assumptions" in out


@pytest.mark.parametrize("workload", ["interactive", "agents", "long-context", "batch"])
def test_every_shipped_workload_plans(capsys, workload):
    code, doc = run_json(capsys, "demo:qwen3-30b-a3b-fp8", "--gpu", "h100-sxm", "--workload", workload)
    assert code == 0 and doc["workload"]["name"] == workload


def test_warnings_come_before_the_long_tables(capsys):
    """A 30B MoE does not fit a 16 GB T4: that must be read before the trade-off and assumption tables."""
    assert main(["plan", "demo:qwen3-30b-a3b-nvfp4", "--gpu", "t4"]) == 0
    out = capsys.readouterr().out
    assert "do not fit" in out
    assert out.index("Warnings") < out.index("Decode under concurrency") < out.index("Assumptions")


def test_turing_plan_recommends_an_fp16_kv_cache(capsys):
    """The checkpoint's FP8 KV cannot run on a T4 (vLLM: 'Re-run with --kv-cache-dtype float16')."""
    code, doc = run_json(capsys, "demo:qwen3-8b-nvfp4", "--gpu", "t4")
    assert code == 0
    rec = doc["recommendation"]
    assert rec["kv_cache_dtype"] == "float16" and rec["flags"]["--kv-cache-dtype"] == "float16"
    assert "bfloat16" not in doc["predictions"]["kv_pool_tokens"]


@pytest.mark.parametrize("engine,gpu,expected", [
    ("vllm", "t4", "float16"), ("vllm", "rtx-3090", "bfloat16"),
    ("sglang", "t4", "auto"),          # SGLang has no FP16 KV value: auto = the FP16 model dtype
    ("fastllm", "rtx-3090", "float16"),  # FastLLM computes in FP16 even on BF16 GPUs
])
def test_one_16bit_kv_candidate_in_the_model_dtype(capsys, engine, gpu, expected):
    code, doc = run_json(capsys, "demo:llama-3.1-8b-gptq-int4", "--gpu", gpu, "--engine", engine)
    assert code == 0
    sixteen = [k for k in doc["predictions"]["kv_pool_tokens"] if k in ("auto", "bf16", "bfloat16", "float16")]
    assert sixteen == [expected]
