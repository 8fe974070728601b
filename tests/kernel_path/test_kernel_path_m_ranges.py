"""Issue 16: a decision names the modules it covers (with N x K per GPU) and the kernel per band of rows M;
the thresholds are rule data with their source; shape and granularity gates are checked on the shard."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from pydantic import ValidationError

from advisor.checkpoint.model import ModuleGroup
from advisor.cli import main
from advisor.doc import Table
from advisor.kernel_path.explain import explain
from advisor.kernel_path.options import InstallOptions
from advisor.kernel_path.render import explanation_doc
from advisor.kernel_path.rules import Candidate
from advisor.kernel_path.rule_files import all_rule_files, load_rule_file

from kernel_path_builders import PRESETS, checkpoint, gpu

FP8_GEMV = "FP8 GEMV (batch < 32) / dequant + cuBLAS (batch >= 32)"


def _dense(exp, role="attn_qkv"):
    return next(d for d in exp.decisions if d.layer_class == "dense_linear" and role in d.roles)


def _with_module(ck, name, role, preset, shape):
    scheme, _, w, a = PRESETS[preset]
    extra = ModuleGroup(name=name, role=role, scheme=scheme, weight=w, act=a, count=32, shape=shape)
    return replace(ck, modules=ck.modules + (extra,))


# ---------------------------------------------------------------- the rule data
@pytest.mark.parametrize("path_file", all_rule_files(), ids=lambda p: p.stem)
def test_every_row_band_cites_a_versioned_source(path_file):
    for path in load_rule_file(path_file).paths:
        for c in path.candidates:
            for r in c.rows:
                assert "@" in r.source and ":" in r.source, (path.id, c.kernel, r.kernel)


def test_row_bands_must_increase_and_end_unbounded():
    base = dict(kernel="k", mma="none", dequant="none", activation="fp16", source="a.cu:1@1")
    band = dict(kernel="k", mma="none", dequant="registers", source="a.cu:1@1")
    Candidate(**base, rows=[{**band, "below": 8}, {**band, "below": 32}, band])
    with pytest.raises(ValidationError):
        Candidate(**base, rows=[{**band, "below": 32}, {**band, "below": 8}, band])
    with pytest.raises(ValidationError):
        Candidate(**base, rows=[{**band, "below": 32}, {**band, "below": 64}])


# ---------------------------------------------------------------- FastLLM: M thresholds, gates on the shard
def test_fastllm_nvfp4_fallback_switches_at_32_rows():
    ck = _with_module(checkpoint("nvfp4-w4a4"), "layers.*.linear_attn.in_proj_a", "gdn_in_proj", "nvfp4-w4a4",
                      (48, 4096))
    exp = explain(ck, gpu("t4"), engine="fastllm")
    d = next(d for d in exp.decisions if d.covers_module("layers.*.linear_attn.in_proj_a"))
    assert [(r.m_min, r.m_max, r.mma, r.dequant) for r in d.m_ranges] == [
        (1, 31, "none", "registers"), (32, None, "hmma_f16", "memory")]
    assert d.at_m(31).kernel == "NVFP4 GEMV (CUDA cores)"
    assert d.at_m(32).kernel == "NVFP4 dequant to FP16 + cublasGemmEx"
    assert "fastllm-linear-fp8.cu:2018-2020" in d.m_ranges[0].source
    # a 16-row launch plan: up to 15 rows one launch, then 16 + 8 + 4 + 1 + 1 + 1
    assert d.at_m(15).launches(15) == 1 and d.at_m(31).launches(31) == 6
    # the wide projections of the same role keep Marlin
    assert _dense(exp, "attn_qkv").kernel == "NVFP4 Marlin (W4A16)"
    assert not _dense(exp, "attn_qkv").covers_module("layers.*.linear_attn.in_proj_a")


@pytest.mark.parametrize("shape, marlin", [((64, 128), True), ((128, 64), True), ((64, 64), False),
                                           ((48, 4096), False)])
def test_fastllm_nvfp4_marlin_needs_one_128_side(shape, marlin):
    """Nvfp4MarlinShapeSupported(): K64xN128 or K128xN64 tiles; N and K multiples of 64 alone do not do."""
    exp = explain(checkpoint("nvfp4-w4a4", shape=shape), gpu("t4"), engine="fastllm")
    assert (_dense(exp).kernel == "NVFP4 Marlin (W4A16)") is marlin


def test_fastllm_gates_marlin_on_the_shard_each_gpu_holds():
    ck = checkpoint("nvfp4-w4a4", shape=(128, 4096))      # N=128 x K=4096 fits both Marlin tiles
    assert _dense(explain(ck, gpu("t4"), engine="fastllm")).kernel == "NVFP4 Marlin (W4A16)"
    # at TP 2 a column-parallel layer holds N=64 x K=4096 (still fits), at TP 4 N=32 (does not)
    two = explain(ck, gpu("t4"), engine="fastllm", gpus=2)
    four = explain(ck, gpu("t4"), engine="fastllm", gpus=4)
    shapes = {c.name: c.shape for c in _dense(two).modules}
    assert shapes["layers.*.attn_qkv"] == (64, 4096) and shapes["layers.*.attn_o"] == (128, 2048)
    assert _dense(two).kernel == "NVFP4 Marlin (W4A16)"
    qkv4 = _dense(four, "attn_qkv")
    assert {c.name: c.shape for c in qkv4.modules}["layers.*.attn_qkv"] == (32, 4096)
    assert qkv4.kernel.startswith("NVFP4 GEMV")
    # row-parallel layers split K instead: attn_o at TP 4 holds 128 x 1024 and keeps Marlin
    assert _dense(four, "attn_o").kernel == "NVFP4 Marlin (W4A16)"


def test_fastllm_fp8_marlin_needs_128x128_block_scales():
    block = _dense(explain(checkpoint("fp8-block"), gpu("t4"), engine="fastllm"))
    assert block.kernel == "FP8 Marlin (W8A16)"
    # one row runs a GEMV over the repacked weights, more rows the Marlin GEMM
    assert [(r.m_min, r.m_max, r.mma) for r in block.m_ranges] == [(1, 1, "none"), (2, None, "hmma_f16")]
    tensor = _dense(explain(checkpoint("fp8-modelopt"), gpu("t4"), engine="fastllm"))
    assert tensor.kernel == FP8_GEMV and tensor.effective_scheme == "W8A16-FP8"
    marlin = next(r for r in tensor.rejected if r.kernel == "FP8 Marlin (W8A16)")
    assert "block" in marlin.reason and "fastllm-linear-fp8-marlin.cu" in marlin.reason
    assert tensor.at_m(1).mma == "none" and tensor.at_m(1).dequant == "registers"
    assert tensor.at_m(2048).dequant == "memory"


def test_fastllm_fp8_cutlass_takes_only_the_granularity_it_was_built_for():
    ada = _dense(explain(checkpoint("fp8-modelopt"), gpu("rtx-4090"), engine="fastllm"))
    assert ada.kernel == "CUTLASS FP8 per-channel (W8A8, sm_89)" and ada.mma == "qmma_e4m3"
    assert _dense(explain(checkpoint("fp8-block"), gpu("rtx-4090"), engine="fastllm")).kernel == "FP8 Marlin (W8A16)"
    bw = _dense(explain(checkpoint("fp8-block"), gpu("rtx-5090"), engine="fastllm"))
    assert bw.kernel == "CUTLASS FP8 block-128 (W8A8, sm_120/121)"
    assert bw.at_m(7).kernel == "FP8 GEMV (CUDA cores)" and bw.at_m(8).mma == "qmma_e4m3"
    assert _dense(explain(checkpoint("fp8-modelopt"), gpu("rtx-5090"), engine="fastllm")).kernel == FP8_GEMV


def test_fastllm_int4_fallback_uses_the_fp16_threshold():
    """FastLLM computes in FP16: FastllmCudaHalfMatMulFloatInt4Group switches at n > 16, not the FP32 path's 8."""
    off = InstallOptions(tp=1)
    d = _dense(explain(checkpoint("gptq-int4", shape=(4096, 4100)), gpu("t4"), engine="fastllm", options=off))
    assert d.kernel.startswith("INT4 GEMV")
    assert d.at_m(16).mma == "none" and d.at_m(17).dequant == "memory"


# ---------------------------------------------------------------- vLLM: the same data, another engine
def test_vllm_flashinfer_block_fp8_switches_kernels_at_32_rows():
    d = _dense(explain(checkpoint("fp8-block"), gpu("h100"), engine="vllm"))
    assert d.kernel == "FlashInferFp8DeepGEMMDynamicBlockScaledKernel"
    assert d.at_m(31).kernel.endswith("(swapAB)") and d.at_m(32).kernel == "DeepGEMM fp8_gemm_nt"
    assert "input.shape[0] < 32" in d.m_ranges[0].note and "flashinfer.py:263-273" in d.m_ranges[0].source


# ---------------------------------------------------------------- what explain shows
def test_explain_shows_modules_and_m_ranges(capsys):
    ck = checkpoint("fp8-modelopt")
    exp = explain(ck, gpu("t4"), engine="fastllm")
    doc = explanation_doc(exp, gpu("t4"), ck, InstallOptions())
    tables = [b for b in doc.blocks if isinstance(b, Table) and (b.title or "").startswith("Kernel by rows")]
    assert tables and [r[0] for r in tables[0].rows] == ["M 1-31", "M >= 32"]
    text = "\n".join(str(b) for b in doc.blocks)
    assert "layers.*.attn_qkv 4096x4096" in text


def test_explain_json_on_a_demo_carries_modules_and_m_ranges(capsys):
    assert main(["explain", "demo:qwen3.6-27b-nvfp4-mixed", "--gpu", "rtx-2080-ti", "--engine", "fastllm",
                 "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    ds = doc["explanation"]["decisions"]
    fp8 = next(d for d in ds if d["checkpoint_scheme"] == "W8A8-FP8")
    assert any(m["name"].endswith("linear_attn.in_proj_qkv") and m["shape"] == [10240, 5120] for m in fp8["modules"])
    assert [(r["m_min"], r["m_max"]) for r in fp8["m_ranges"]] == [(1, 31), (32, None)]
    assert all("@d3aea32" in r["source"] for r in fp8["m_ranges"])
