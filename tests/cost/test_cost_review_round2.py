"""Second expert review of `plan`: one block per finding (each test failed before its fix)."""

from __future__ import annotations

import json

import pytest
from dataclasses import replace

from cost_builders import dense_checkpoint, explanation, moe_checkpoint

from advisor.cli import main
from advisor.cost import context
from advisor.cost.engine_profile import load_engine_memory
from advisor.cost.overrides import Overrides
from advisor.cost.plan import make_plan
from advisor.cost.plan_doc import to_doc
from advisor.cost.workload import get_workload
from advisor.gpu_table import get_gpu

VLLM = load_engine_memory("vllm")


def run_json(capsys, *argv):
    code = main(["plan", *argv, "--json"])
    return code, json.loads(capsys.readouterr().out)


# ---------------------------------------------------------------- 1. a path the engine refuses
def test_path_the_engine_cannot_load_gives_na_speeds_and_no_launch_line(capsys):
    code, doc = run_json(capsys, "demo:gpt-oss-20b-mxfp4", "--gpu", "rtx-4090", "--engine", "fastllm")
    assert code == 0
    p, r = doc["predictions"], doc["recommendation"]
    assert p["decode_tok_s"] is None and p["prefill_tok_s"] is None and p["decode_aggregate_tok_s"] == {}
    assert "unsupport src dtype U8" in p["na"]["decode_tok_s"]
    assert r["flags"] == {} and "unsupport src dtype U8" in r["blocked"]
    assert "decode_tok_s" not in doc["derivations"]
    assert main(["plan", "demo:gpt-oss-20b-mxfp4", "--gpu", "rtx-4090", "--engine", "fastllm"]) == 0
    out = capsys.readouterr().out
    assert "cannot run — no launch line" in out and "--max_batch" not in out


def test_refused_path_renders_in_every_report_format_and_the_tui_cost_view(tmp_path):
    from advisor.report.output import schema_errors

    argv = ["demo:gpt-oss-20b-mxfp4", "--gpu", "rtx-4090", "--engine", "fastllm"]
    texts = {}
    for fmt in ("json", "md", "html"):
        out = tmp_path / f"r.{fmt}"
        assert main(["report", *argv, "--format", fmt, "-o", str(out)]) == 0
        texts[fmt] = out.read_text()
    data = json.loads(texts["json"])
    assert schema_errors(data) == []
    assert data["plan"]["predictions"]["decode_tok_s"] is None and data["plan"]["recommendation"]["blocked"]
    assert "unsupport src dtype U8" in texts["md"] and "unsupport src dtype U8" in texts["html"]
    from advisor import views
    from advisor.analysis import Selection, analyze

    a = analyze(Selection("demo:gpt-oss-20b-mxfp4", "rtx-4090", engine="fastllm"))
    view = repr(views.cost_doc(a))
    assert "cannot run — no launch line" in view and "N/A" in view


def test_a_linear_kernel_the_engine_rejects_blocks_the_plan():
    gpu = get_gpu("b200")
    exp = explanation("W8A8-FP8", gpu=gpu.id, mma="tcgen05_e4m3")
    bad = tuple(replace(d, runs=False, error="Int8 not supported on SM100.") if d.layer_class == "dense_linear"
                else d for d in exp.decisions)
    plan = make_plan(dense_checkpoint("W8A8-FP8"), replace(exp, decisions=bad), gpu, gpus=1,
                     workload=get_workload("interactive"), engine_memory=VLLM)
    assert plan.predictions.decode_tok_s is None
    assert "Int8 not supported on SM100" in plan.recommendation.blocked and plan.recommendation.flags == {}
    assert "Int8 not supported on SM100" in repr(to_doc(plan))
    ok = make_plan(dense_checkpoint("W8A8-FP8"), exp, gpu, gpus=1, workload=get_workload("interactive"),
                   engine_memory=VLLM)
    assert ok.predictions.decode_tok_s > 0 and ok.recommendation.flags and not ok.recommendation.blocked


# ---------------------------------------------------------------- 2. small-M padding on tcgen05 / wgmma
def test_swap_ab_pads_small_batches_on_the_n_side_only():
    from advisor.cost.efficiency import padded_rows

    assert padded_rows("tcgen05_fp4_block_scaled", 1) == 16          # not 128
    assert padded_rows("wgmma_e4m3", 1) == 8                         # not 64
    assert padded_rows("tcgen05_bf16", 200) == 256 and padded_rows("wgmma_bf16", 100) == 128
    assert padded_rows("hmma_bf16", 1) == 16                          # mma.sync unchanged


def test_b200_batch_one_decode_is_bandwidth_bound(capsys):
    _, doc = run_json(capsys, "demo:qwen3.6-27b-nvfp4-mixed", "--gpu", "b200", "--engine", "vllm")
    p, i = doc["predictions"], doc["derivations"]["decode_tok_s"]["inputs"]
    assert p["bound"] == "bandwidth" and p["crossover_batch"] != 1
    assert i["t_mma"] < i["t_bytes"]
    assert any(a["key"] == "swap_ab_max_m" and "cutlass_moe.py" in a["source"] for a in doc["assumptions"])


def test_large_batch_prefill_on_b200_stays_compute_bound():
    gpu = get_gpu("b200")
    ck = dense_checkpoint("W4A4-NVFP4")
    ctx = context.build(ck, explanation("W4A4-NVFP4", gpu=gpu.id, mma="tcgen05_fp4_block_scaled",
                                        kv_mma="tcgen05_bf16"), gpu, gpus=1, engine=VLLM, overrides=Overrides())
    kv = VLLM.kv_dtype("bfloat16")
    pf = ctx.model.prefill(8192, 8192, kv)
    assert pf.t_compute > pf.t_bytes
    big = ctx.model.decode_step(512, 1024, kv)
    rate = ctx.model.eff.mma_tflops["tcgen05_fp4_block_scaled"] * 1e12
    linear = sum(ctx.model.weights.flops_per_token(1)[part] for part in ctx.model.weights.parts
                 if part.mma == "tcgen05_fp4_block_scaled")
    assert big.derived.inputs["t_mma"] >= 512 * linear / rate      # 512 rows: four full M=128 tiles


# ---------------------------------------------------------------- 3. the MTP draft layer's KV
def test_mtp_draft_layer_keeps_kv_in_the_same_pool(capsys):
    _, mtp = run_json(capsys, "demo:qwen3.6-27b-nvfp4-mixed", "--gpu", "rtx-5090", "--engine", "vllm")
    _, ngram = run_json(capsys, "demo:qwen3.6-27b-nvfp4-mixed", "--gpu", "rtx-5090", "--engine", "vllm",
                        "--spec-method", "ngram")
    assert mtp["recommendation"]["speculative_method"] == "mtp" and mtp["recommendation"]["draft_tokens"] > 0
    a, b = mtp["derivations"]["kv_bytes_per_token"], ngram["derivations"]["kv_bytes_per_token"]
    assert a["inputs"]["kv_layers"] == b["inputs"]["kv_layers"] + 1 and a["inputs"]["mtp_draft_kv_layers"] == 1
    assert a["value"] * b["inputs"]["kv_layers"] == b["value"] * a["inputs"]["kv_layers"]
    assert "gpu_model_runner.py" in a["source"]
    kv = mtp["recommendation"]["kv_cache_dtype"]
    assert mtp["predictions"]["kv_pool_tokens"][kv] < ngram["predictions"]["kv_pool_tokens"][kv]


# ---------------------------------------------------------------- 4. SGLang's split sliding-window pool
def test_sglang_splits_the_pool_between_full_and_window_layers(capsys):
    sgl = load_engine_memory("sglang")
    assert sgl.swa_full_tokens_ratio == 0.8 and "schedule.py" in sgl.swa_source
    assert VLLM.swa_full_tokens_ratio is None
    _, doc = run_json(capsys, "demo:gpt-oss-20b-mxfp4", "--gpu", "rtx-3090", "--engine", "sglang")
    d = doc["derivations"]
    full = d["kv_bytes_per_token"]["inputs"]["kv_layers"]
    win = d["kv_bytes_per_token"]["inputs"]["window_layers"]
    assert full and win and d["kv_bytes_per_token"]["inputs"]["swa_ratio"] == 0.8
    pool = d["kv_pool_bytes"]["value"]
    tokens = doc["predictions"]["kv_pool_tokens"][doc["recommendation"]["kv_cache_dtype"]]
    per_layer = d["kv_bytes_per_token"]["value"] / (full + 0.8 * win)
    assert tokens == pytest.approx(pool / (per_layer * (full + 0.8 * win)), abs=1)
    assert tokens < pool / (per_layer * full) * 0.6          # not pool / full layers alone
    assert any(a["key"] == "swa_full_tokens_ratio" for a in doc["assumptions"])


def test_split_pool_concurrency_is_capped_by_the_window_part():
    from advisor.cost.kv import layout

    arch = replace(dense_checkpoint("BF16", layers=24).arch, kv_layers=12, sliding_window=128,
                   sliding_window_layers=12)
    bf16 = VLLM.kv_dtype("bfloat16")
    vllm_like, sgl_like = layout(arch), layout(arch, swa_ratio=0.8)
    per = vllm_like.bytes_per_token_layer(bf16)
    pool = per * 21.6 * 10_000                                      # 10k full tokens + 8k window tokens
    assert vllm_like.bytes_per_token(bf16) == 12 * per               # vLLM: window layers capped, unchanged
    assert sgl_like.max_context(bf16, pool, 1) == pytest.approx(10_000)
    assert sgl_like.max_concurrency(bf16, pool, 100) == 80           # window part: 8000 // 100
    assert sgl_like.max_concurrency(bf16, pool, 1000) == 10          # full part: 10000 // 1000
    assert sgl_like.max_context(bf16, pool, 100) == pytest.approx(80)   # 100 x 128 > 8000 window tokens


# ---------------------------------------------------------------- 5. MoE decode costs
def _decode(ck, gpu):
    ctx = context.build(ck, explanation("W4A16-NVFP4", gpu=gpu.id), gpu, gpus=1, engine=VLLM, overrides=Overrides())
    return ctx, ctx.model.decode_step(1, 1024, VLLM.kv_dtype("bfloat16"))


def test_moe_decode_is_slower_than_a_dense_model_reading_the_same_bytes():
    gpu = get_gpu("rtx-5090")
    moe_ctx, moe = _decode(moe_checkpoint("W4A16-NVFP4", layers=48), gpu)
    inter = 1024
    while True:                                   # a dense model of as many layers reading at least as much
        dense_ctx, dense = _decode(dense_checkpoint("W4A16-NVFP4", layers=48, hidden=2048, heads=32, kv_heads=4,
                                                    vocab=151936, inter=inter), gpu)
        if dense.bytes_read >= moe.bytes_read:
            break
        inter += 256
    assert dense.bytes_read >= moe.bytes_read and moe.seconds > dense.seconds
    assert moe_ctx.model.kernels_per_step() == 48 * (10 + 4) and dense_ctx.model.kernels_per_step() == 48 * 10
    keys = {a.key: a for a in moe_ctx.assumptions}
    assert "estimate" in keys["bandwidth_eff.moe_grouped"].source
    assert "fused_moe.py" in keys["moe_extra_kernels_per_layer"].source
    assert "bandwidth_eff.moe_grouped" not in {a.key for a in dense_ctx.assumptions}


def test_gpt_oss_decode_on_rtx_5090_is_below_the_dense_marlin_figure(capsys):
    _, doc = run_json(capsys, "demo:gpt-oss-20b-mxfp4", "--gpu", "rtx-5090", "--engine", "vllm")
    i = doc["derivations"]["decode_tok_s"]["inputs"]
    dense_only = i["bytes_read"] / (get_gpu("rtx-5090").bandwidth_gbs * 1e9 * 0.925)
    assert i["t_bytes"] > dense_only * 1.05            # the experts stream below Marlin's dense 92.5 %
    assert doc["predictions"]["decode_tok_s"] < 300
