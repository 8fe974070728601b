"""Issue 16: `plan` charges the kernel the engine runs for each module group and each number of rows M.

The realistic case is the hybrid 27B (48 Gated-DeltaNet + 16 full-attention layers, hidden 5120) converted
to NVFP4 and to per-tensor FP8 (ModelOpt), planned for FastLLM 1.9 on 2x RTX 2080 Ti (22 GB, TP 2).
"""

from __future__ import annotations

import json

import pytest
from cost_hybrid27b import write_hybrid27b

from advisor.checkpoint.inspect import inspect_checkpoint
from advisor.cli import main
from advisor.cost import context
from advisor.cost.engine_profile import load_engine_memory
from advisor.cost.overrides import Overrides
from advisor.gpu_table import get_gpu
from advisor.kernel_path.explain import explain

GDN = "model.language_model.layers.*.linear_attn."
MLP = "model.language_model.layers.*.mlp."
# what a decode step reads: the text decoder and the head (vision tower: image prompts; MTP: drafting only)
DECODE_ROLES_SKIPPED = ("vision", "mtp", "embed")


@pytest.fixture(scope="module")
def hybrid(tmp_path_factory):
    root = tmp_path_factory.mktemp("hybrid27b")
    return {algo: write_hybrid27b(root / algo.lower(), algo) for algo in ("NVFP4", "FP8")}


@pytest.fixture(scope="module")
def turing():
    return get_gpu("rtx-2080-ti")


def _ctx(path, gpu, gpus=2):
    ck = inspect_checkpoint(str(path))
    exp = explain(ck, gpu, gpus=gpus, engine="fastllm")
    ctx = context.build(ck, exp, gpu, gpus=gpus, engine=load_engine_memory("fastllm"),
                        overrides=Overrides(vram_gb=22.0))
    return ck, exp, ctx


def _part(ctx, name):
    return next(p for p in ctx.model.weights.parts if p.name == name)


def _cost(step, name):
    return next(c for c in step.parts if c.part.name == name)


def _plan(capsys, path, *extra):
    code = main(["plan", str(path), "--gpu", "rtx-2080-ti", "--gpus", "2", "--vram", "22", "--engine", "fastllm",
                 "--json", *extra])
    assert code == 0
    return json.loads(capsys.readouterr().out)


# ---------------------------------------------------------------- 1. decisions per module, not per role
def test_same_role_modules_get_their_own_decision(hybrid, turing):
    ck, exp, _ = _ctx(hybrid["NVFP4"], turing)
    narrow = next(d for d in exp.decisions if d.covers_module(GDN + "in_proj_a"))
    wide = next(d for d in exp.decisions if d.covers_module(GDN + "in_proj_qkv"))
    assert narrow is not wide and narrow.roles == wide.roles[:1] == ("gdn_in_proj",)
    assert narrow.kernel.startswith("NVFP4 GEMV") and wide.kernel == "NVFP4 Marlin (W4A16)"
    # the decision says what it covers: module names and their N x K on one GPU at TP 2
    shapes = {c.name.rsplit(".", 1)[-1]: c.shape for c in narrow.modules}
    assert shapes == {"in_proj_a": (24, 5120), "in_proj_b": (24, 5120)}
    assert {c.name: c.shape for c in wide.modules}[GDN + "out_proj"] == (5120, 3072)   # row-parallel: K split


def test_two_same_role_modules_with_different_kernels_are_costed_differently(hybrid, turing):
    _, _, ctx = _ctx(hybrid["NVFP4"], turing)
    a, qkv = _part(ctx, GDN + "in_proj_a"), _part(ctx, GDN + "in_proj_qkv")
    assert a.at_m(1).kernel == "NVFP4 GEMV (CUDA cores)" and a.at_m(1).mma == "none"
    assert qkv.at_m(1).kernel == "NVFP4 Marlin (W4A16)" and qkv.at_m(1).dequant == "registers"
    kv = ctx.default_kv
    one = ctx.model.decode_step(1, 1024, kv, tp=2)
    # batch 1 copies nothing: neither the GEMV nor Marlin writes an FP16 weight copy
    assert _cost(one, qkv.name).copy_bytes == 0 and _cost(one, a.name).copy_bytes == 0
    # Marlin reads its repacked 9 bytes per 16 values (the checkpoint's size); the GEMV reads FastLLM's own
    # NVFP4_BLOCK_16 layout, 8 packed bytes + a float scale per 16 values
    assert _cost(one, qkv.name).weight_bytes == pytest.approx(qkv.stored_bytes / 2)
    assert _cost(one, a.name).weight_bytes == pytest.approx(a.params / 2 * 0.75)
    many = ctx.model.decode_step(32, 1024, kv, tp=2)
    # from 32 rows on only the narrow projections take FastLLM's dequantize + cuBLAS path, and pay it in full
    assert _cost(many, a.name).copy_bytes == pytest.approx(a.params / 2 * 4.0)
    assert _cost(many, qkv.name).copy_bytes == 0


def test_summary_headline_is_the_decision_that_moves_most_bytes(hybrid, turing):
    _, exp, _ = _ctx(hybrid["NVFP4"], turing)
    first = exp.summary.split(". ")[0]
    assert "unpacked in registers" in first and "in memory" not in first
    assert "in_proj_a, in_proj_b" in exp.summary          # the narrow ones get their own sentence


# ---------------------------------------------------------------- the realistic case
def test_hybrid_nvfp4_decodes_faster_than_fp8_on_fastllm_turing_tp2(capsys, hybrid):
    nvfp4 = _plan(capsys, hybrid["NVFP4"])
    fp8 = _plan(capsys, hybrid["FP8"])
    assert nvfp4["recommendation"]["tp"] == fp8["recommendation"]["tp"] == 2
    assert nvfp4["predictions"]["decode_tok_s"] > 1.2 * fp8["predictions"]["decode_tok_s"]


@pytest.mark.parametrize("algo", ["NVFP4", "FP8"])
def test_decode_reads_the_module_bytes_each_gpu_holds(hybrid, turing, algo):
    ck, _, ctx = _ctx(hybrid[algo], turing)
    held = sum(m.stored_bytes for m in ck.modules if m.role not in DECODE_ROLES_SKIPPED) / 2
    step = ctx.model.decode_step(1, 1024, ctx.default_kv, tp=2)
    read = sum(c.weight_bytes + c.copy_bytes for c in step.parts)
    assert read == pytest.approx(held, rel=0.05)


# ---------------------------------------------------------------- 2. the kernel depends on M
def test_m_threshold_switches_the_kernel_inside_one_plan(hybrid, turing):
    _, _, ctx = _ctx(hybrid["FP8"], turing)
    kv, name = ctx.default_kv, MLP + "down_proj"
    below = _cost(ctx.model.decode_step(31, 1024, kv, tp=2), name)
    at = _cost(ctx.model.decode_step(32, 1024, kv, tp=2), name)
    assert below.kernel.kernel == "FP8 GEMV (CUDA cores)" and below.copy_bytes == 0
    assert at.kernel.kernel == "FP8 dequant to FP16 + cublasGemmEx" and at.copy_bytes > 0
    assert "fastllm-linear-fp8.cu" in below.kernel.source and "fastllm-linear-fp8.cu" in at.kernel.source
    # speculative verification scores batch x (k+1) rows in one call: 8 x 4 = 32 takes the cuBLAS path
    verify = _cost(ctx.model.decode_step(8, 1024, kv, tp=2, verify_tokens=4), name)
    assert verify.rows == 32 and verify.kernel.kernel == at.kernel.kernel
    # prefill runs the chunk as M
    chunk = _cost(ctx.model.prefill(4096, 2048, kv, tp=2), name)
    assert chunk.rows == 2048 and chunk.kernel.kernel == at.kernel.kernel


def test_gemv_launches_reread_weights_unless_they_fit_in_l2(hybrid, turing):
    _, _, ctx = _ctx(hybrid["FP8"], turing)
    kv = ctx.default_kv
    one = ctx.model.decode_step(1, 1024, kv, tp=2)
    nine = ctx.model.decode_step(9, 1024, kv, tp=2)      # FP8 GEMV: one launch of 8 rows + one of 1
    big, small = MLP + "down_proj", GDN + "in_proj_a"
    assert _cost(nine, big).launches == 2
    assert _cost(nine, big).weight_bytes == pytest.approx(2 * _cost(one, big).weight_bytes)
    # 24 x 5120 FP8 per GPU stays in the 5.5 MB L2 between launches
    assert _cost(nine, small).weight_bytes == pytest.approx(_cost(one, small).weight_bytes)


def test_plan_json_names_the_kernel_at_the_m_used_per_module_group(capsys, hybrid):
    doc = _plan(capsys, hybrid["FP8"], "--prompt", "4096")
    dec = {g["module"]: g for g in doc["derivations"]["decode_linear_layers"]["inputs"]["module_groups"]}
    pre = doc["derivations"]["prefill_linear_layers"]
    pre_groups = {g["module"]: g for g in pre["inputs"]["module_groups"]}
    g = dec[MLP + "up_proj"]
    assert g["kernel"] == "FP8 GEMV (CUDA cores)" and g["rows_M"] == 1 and g["kernel_rows"] == "M 1-31"
    for key in ("threshold_source", "bandwidth_eff_source", "compute_source"):
        assert g[key], key
    p = pre_groups[MLP + "up_proj"]
    assert p["rows_M"] == pre["inputs"]["M"] >= 32 and p["kernel"] == "FP8 dequant to FP16 + cublasGemmEx"
    assert p["copy_bytes"] > 0
