"""The tuner and make_plan: choices respect explain, fit the workload, and show their trade-offs."""

from __future__ import annotations

from dataclasses import replace

import pytest
from cost_builders import decision, dense_checkpoint, explanation, h100, moe_checkpoint, rtx2080ti, rtx3090

from advisor.cost.overrides import Overrides
from advisor.cost.plan import make_plan
from advisor.cost.workload import Workload, get_workload, load_workloads
from advisor.errors import BadInput


def kv_decisions(**runs):
    return {name: decision("attention_kv", "KV", kv=name, runs=ok, error=None if ok else f"{name} not supported")
            for name, ok in runs.items()}


def plan(ck=None, ex=None, gpu=None, workload="interactive", **kw):
    return make_plan(ck or dense_checkpoint(), ex or explanation(kv="bf16"), gpu or rtx3090(),
                     workload=get_workload(workload) if isinstance(workload, str) else workload, **kw)


def test_plan_json_has_the_contract_keys():
    p = plan(kv_decisions=kv_decisions(bfloat16=True, fp8=True, nvfp4=True)).to_json()
    pred = p["predictions"]
    for key in ("decode_tok_s", "decode_aggregate_tok_s", "prefill_tok_s", "prefill_seconds", "kv_pool_tokens",
                "max_context_per_request", "bound", "speculative"):
        assert key in pred
    assert pred["bound"] in ("bandwidth", "compute")
    assert set(pred["kv_pool_tokens"]) == {"bfloat16", "fp8", "nvfp4"}
    rec = p["recommendation"]
    for key in ("kv_cache_dtype", "max_batch", "draft_tokens", "memory_share", "chunked_prefill", "tp"):
        assert key in rec.__dict__
    assert p["assumptions"] and all(a.source for a in p["assumptions"])
    assert p["derivations"]["decode_tok_s"].formula


def test_never_recommends_a_kv_dtype_explain_rejects():
    w = get_workload("long-context")
    allowed = plan(workload=w, kv_decisions=kv_decisions(bfloat16=True, fp8=True, nvfp4=True))
    assert allowed.recommendation.kv_cache_dtype != "bfloat16"    # 128k x 2 does not fit in BF16
    for rejected in ("fp8", "nvfp4"):
        runs = {"bfloat16": True, "fp8": True, "nvfp4": True, rejected: False}
        p = plan(workload=w, kv_decisions=kv_decisions(**runs))
        assert p.recommendation.kv_cache_dtype != rejected
        assert rejected not in p.predictions.kv_pool_tokens
        notes = [o.note for o in p.tradeoffs if o.knob == "kv_cache_dtype" and o.value == rejected]
        assert notes and "rejected" in notes[0]


def test_without_kv_decisions_only_the_explained_dtype_is_eligible():
    p = plan(ex=explanation(kv="fp8_e4m3"), workload="long-context")
    assert set(p.predictions.kv_pool_tokens) == {"fp8_e4m3"}
    assert p.recommendation.kv_cache_dtype == "fp8_e4m3"


def test_user_fixed_settings_are_kept():
    ov = Overrides(kv_cache_dtype="bfloat16", max_batch=3, memory_share=0.8, chunked_prefill=4096, draft_tokens=0)
    p = plan(overrides=ov, workload="agents", kv_decisions=kv_decisions(bfloat16=True, fp8=True))
    r = p.recommendation
    assert (r.kv_cache_dtype, r.max_batch, r.memory_share, r.chunked_prefill, r.draft_tokens) == (
        "bfloat16", 3, 0.8, 4096, 0)


def test_batch_workload_uses_a_larger_batch_and_no_drafts():
    kvd = kv_decisions(bfloat16=True, fp8=True)
    inter = plan(workload="interactive", kv_decisions=kvd)
    batch = plan(workload="batch", kv_decisions=kvd)
    assert batch.recommendation.max_batch > inter.recommendation.max_batch
    assert batch.recommendation.draft_tokens == 0
    agg = batch.predictions.decode_aggregate_tok_s
    assert max(agg.values()) > agg[1]


def test_mtp_checkpoint_gets_draft_tokens_for_interactive_use():
    p = plan(ck=dense_checkpoint(mtp_layers=1), workload="interactive")
    assert p.recommendation.speculative_method == "mtp"
    assert p.recommendation.draft_tokens >= 1
    per_k = p.predictions.speculative.per_k
    assert len(per_k) == 8 and per_k[0]["speedup"] > 1


def test_model_too_big_for_one_gpu_uses_tp():
    big = dense_checkpoint("BF16", layers=80, hidden=8192, inter=28672, heads=64, kv_heads=8)  # ~70B BF16
    p = plan(ck=big, ex=explanation("BF16", gpu="h100-sxm", kv="bf16"), gpu=h100(), gpus=4)
    assert p.recommendation.tp >= 2
    assert p.predictions.kv_pool_tokens["bfloat16"] > 0
    tps = [o for o in p.tradeoffs if o.knob == "tp"]
    assert len(tps) == 3 and not any(o.chosen and o.value == "1" for o in tps)


def test_what_if_vram_changes_the_pool():
    small = plan(overrides=Overrides(vram_gb=11.0))
    big = plan(overrides=Overrides(vram_gb=22.0))
    assert big.predictions.kv_pool_tokens["bfloat16"] > small.predictions.kv_pool_tokens["bfloat16"]


def test_moe_decode_grows_bytes_with_batch_until_all_experts_are_read():
    p = plan(ck=moe_checkpoint(), ex=explanation(kv="bf16"), workload="batch")
    agg = p.predictions.decode_aggregate_tok_s
    batches = sorted(agg)
    assert all(agg[b2] >= agg[b1] * 0.9 for b1, b2 in zip(batches, batches[1:]))


def test_user_workloads_file(tmp_path):
    f = tmp_path / "w.yaml"
    f.write_text("workloads:\n  rag:\n    concurrency: 4\n    prompt_tokens: 8000\n    output_tokens: 300\n"
                 "    objective: latency\n")
    w = get_workload("rag", f)
    assert w.context_tokens == 8300 and w.objective == "latency"
    assert plan(workload=w).workload.name == "rag"
    bad = tmp_path / "bad.yaml"
    bad.write_text("workloads:\n  x:\n    concurrency: zero\n    prompt_tokens: 1\n    output_tokens: 1\n")
    with pytest.raises(BadInput, match="concurrency"):
        get_workload("x", bad)
    with pytest.raises(BadInput, match="unknown workload"):
        get_workload("nope", f)
    broken = tmp_path / "broken.yaml"
    broken.write_text("workloads: [\n")
    with pytest.raises(BadInput):
        load_workloads(str(broken))


def test_shipped_workloads():
    table = load_workloads()
    assert {"interactive", "agents", "long-context", "batch"} <= set(table)
    assert table["long-context"].prompt_tokens >= 32768


def test_context_is_capped_at_the_model_maximum():
    w = Workload("x", "", 1, 100_000, 100, 200_000, "context")
    p = plan(ck=dense_checkpoint(max_pos=32768), workload=w, kv_decisions=kv_decisions(bfloat16=True, fp8=True))
    assert p.predictions.max_context_per_request <= 32768
    assert any("maximum context" in x for x in p.warnings)


def test_plan_is_frozen():
    p = plan()
    with pytest.raises(AttributeError):
        p.gpus = 2  # type: ignore[misc]
    assert replace(p, gpus=2).gpus == 2


def test_kv_that_cannot_run_is_replaced_or_flagged():
    ex = explanation(kv="fp8_e4m3", kv_runs=False)
    fixed = plan(ex=ex, kv_decisions=kv_decisions(bfloat16=True, fp8=False))
    assert fixed.recommendation.kv_cache_dtype == "bfloat16"
    assert any("does not run here" in w for w in fixed.warnings)
    stuck = plan(ex=ex)
    assert any("no KV dtype explain accepts" in w for w in stuck.warnings)


def test_implicit_ngram_is_shown_not_recommended_but_explicit_ngram_is_tuned():
    implicit = plan(workload="interactive")
    assert implicit.predictions.speculative.method == "ngram"
    assert implicit.predictions.speculative.per_k and implicit.recommendation.draft_tokens == 0
    explicit = plan(workload="interactive", overrides=Overrides(spec_method="ngram", acceptance=(0.7, 0.6, 0.5)))
    assert explicit.recommendation.draft_tokens >= 1
    assert explicit.recommendation.speculative_method == "ngram"
    # measured acceptance replaces the default curve
    e1 = explicit.predictions.speculative.per_k[0]["expected_tokens_per_step"]
    assert e1 == pytest.approx(1.7)


def test_unknown_kv_dtype_for_the_engine_is_a_usage_error():
    from advisor.errors import UsageError
    with pytest.raises(UsageError):
        plan(overrides=Overrides(kv_cache_dtype="turboquant_4bit_nc"))


# ---------------------------------------------------------------- the checkpoint's own KV dtype
def test_a_declared_calibrated_fp8_kv_is_kept_when_it_is_as_fast():
    """The interactive workload fits in every KV dtype here; BF16 KV would only be preferred for its
    bits, but the checkpoint ships calibrated FP8 KV scales ('auto' runs them): keep fp8 and say so."""
    ck = replace(dense_checkpoint(), kv_cache_quant="fp8")
    runs = kv_decisions(bfloat16=True, fp8=True, nvfp4=True)
    p = plan(ck=ck, ex=explanation(kv="fp8_e4m3"), kv_decisions=runs)
    assert p.recommendation.kv_cache_dtype == "fp8"
    fp8 = next(o for o in p.tradeoffs if o.knob == "kv_cache_dtype" and o.value == "fp8")
    assert "calibrated" in fp8.note
    # the same checkpoint without declared KV scales keeps the tuner's plain rule (more bits within 3 %)
    plain = plan(ex=explanation(kv="bf16"), kv_decisions=runs)
    speed = {o.value: o.metrics["objective_tok_s"] for o in plain.tradeoffs if o.knob == "kv_cache_dtype"}
    within = [k for k, v in speed.items() if v >= max(speed.values()) * (1 - 0.03)]
    assert plain.recommendation.kv_cache_dtype == max(within, key=lambda k: {"bfloat16": 16, "fp8": 8}.get(k, 4))
    fp8_plain = next(o for o in plain.tradeoffs if o.knob == "kv_cache_dtype" and o.value == "fp8")
    assert "uncalibrated" in fp8_plain.note


def test_leaving_the_declared_kv_dtype_is_explained():
    ck = replace(dense_checkpoint(), kv_cache_quant="fp8")
    p = plan(ck=ck, ex=explanation(kv="fp8_e4m3"), workload="long-context", overrides=Overrides(vram_gb=22),
             kv_decisions=kv_decisions(bfloat16=True, fp8=True, nvfp4=True))
    # 2 x 128k tokens of an 8B-class model need more than the FP8 pool of a 22 GB card
    fp8 = next(o for o in p.tradeoffs if o.knob == "kv_cache_dtype" and o.value == "fp8")
    assert fp8.metrics["fits_workload"] is False
    assert p.recommendation.kv_cache_dtype == "nvfp4"
    assert any("declares a calibrated fp8 KV cache" in w and "does not hold" in w for w in p.warnings)


def test_a_gpu_without_bf16_gets_an_fp16_kv_cache_never_bfloat16():
    """vLLM on Turing: 'Re-run with --kv-cache-dtype float16' (triton_attn.py:510-524)."""
    p = plan(gpu=rtx2080ti(), ex=explanation(kv="bf16", gpu="rtx-2080-ti", mma="hmma_f16", kv_mma="hmma_f16"),
             kv_decisions=kv_decisions(bfloat16=True, fp8=False, nvfp4=False))
    assert p.recommendation.kv_cache_dtype == "float16"
    assert "bfloat16" not in p.predictions.kv_pool_tokens
    assert p.recommendation.flags["--kv-cache-dtype"] == "float16"


def test_a_throughput_batch_never_exceeds_the_workloads_concurrency():
    """8 agent streams on an 80 GB card: the pool holds far more, but only 8 requests ever exist."""
    kvd = kv_decisions(bfloat16=True, fp8=True)
    agents = get_workload("agents")
    p = plan(gpu=h100(), workload=agents, kv_decisions=kvd)
    assert p.recommendation.max_batch <= agents.concurrency
    assert all(int(o.value) <= agents.concurrency for o in p.tradeoffs if o.knob == "max_batch")
