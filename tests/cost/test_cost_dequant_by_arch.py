"""Issue 16 point 3: what dequantization costs depends on the engine's kernel and the architecture, not on
one set of vLLM-Marlin-on-sm_86 constants; a copy to FP16 in memory is charged where the engine makes it."""

from __future__ import annotations

import pytest
from cost_builders import dense_checkpoint, rtx2080ti, rtx3090

from advisor.cost import context, efficiency
from advisor.cost.engine_profile import load_engine_memory
from advisor.cost.overrides import Overrides
from advisor.kernel_path.model import Explanation, KernelRange, LayerDecision

FASTLLM = load_engine_memory("fastllm")
SRC = "src/devices/cuda/linear/fastllm-linear-fp8.cu:2018-2020@d3aea32"


def _explanation(gpu, *, ranges=(), mma="hmma_f16", dequant="registers", kernel="NVFP4 Marlin (W4A16)"):
    dense = LayerDecision(layer_class="dense_linear", roles=("attn_qkv", "attn_o", "mlp_gate_up", "mlp_down"),
                          checkpoint_scheme="W4A16-NVFP4", effective_scheme="W4A16-NVFP4", kernel=kernel, mma=mma,
                          activation_dtype="fp16", dequant=dequant, runs=True, reasons=("test",), m_ranges=ranges)
    attn = LayerDecision(layer_class="attention_kv", roles=("attention",), checkpoint_scheme="KV bf16",
                         effective_scheme="KV fp16", kernel="attn", mma="hmma_f16", activation_dtype="fp16",
                         dequant="none", runs=True, reasons=("test",), kv_cache_dtype="fp16")
    return Explanation(engine="fastllm", engine_version="1.9", requested_version=None, version_note=None,
                       gpu_id=gpu.id, gpus=1, checkpoint_label="W4A16-NVFP4", decisions=(dense, attn),
                       summary="", runs=True)


def _ctx(gpu, **kw):
    ck = dense_checkpoint("W4A16-NVFP4", layers=4)
    return context.build(ck, _explanation(gpu, **kw), gpu, gpus=1, engine=FASTLLM, overrides=Overrides())


def _dense(ctx):
    return next(p for p in ctx.model.weights.parts if p.name == "layers.*.mlp.down_proj")


def test_turing_marlin_hides_no_dequant_behind_the_tensor_cores():
    """No cp.async on sm_75: the Ampere-calibrated 30 % overlap does not apply there."""
    ampere = efficiency.dequant_cost("tiled", "w4a16_nvfp4", 86)
    turing = efficiency.dequant_cost("tiled", "w4a16_nvfp4", 75)
    assert ampere.overlap == efficiency.DEQUANT_OVERLAP[0] and turing.overlap == 0.0
    assert turing.load_overlap < ampere.load_overlap == 1.0
    assert "cp_async" in turing.overlap_source and "estimate" in turing.load_overlap_source
    t = _ctx(rtx2080ti())
    part = _dense(t)
    issue = t.model.eff.issue_rate
    want = 1e9 * efficiency.DEQUANT_INSTR["w4a16_nvfp4"][0] / 32 / issue        # nothing hidden
    assert t.model._dequant_seconds(part, 1e9, 1) == pytest.approx(want)
    a = _ctx(rtx3090())
    want_a = 1e9 * efficiency.DEQUANT_INSTR["w4a16_nvfp4"][0] / 32 / a.model.eff.issue_rate * (
        1 - efficiency.DEQUANT_OVERLAP[0])
    assert a.model._dequant_seconds(_dense(a), 1e9, 1) == pytest.approx(want_a)


def test_turing_marlin_exposes_part_of_its_load_time():
    t = _ctx(rtx2080ti())
    step = t.model.decode_step(1, 0, t.default_kv)
    c = next(c for c in step.parts if c.part.name == "layers.*.mlp.down_proj")
    assert c.t_exposed == pytest.approx(0.5 * min(c.t_bytes, c.t_compute))
    a = _ctx(rtx3090())
    assert a.model.decode_step(1, 0, a.default_kv).t_exposed == 0
    keys = {x.key for x in t.assumptions}
    assert "load_compute_overlap.tiled.sm75" in keys and "dequant_overlap.tiled.sm75" in keys


def test_copy_to_memory_is_charged_only_where_the_engine_copies_and_then_in_full():
    gpu = rtx2080ti()
    ranges = (KernelRange(1, 31, "NVFP4 GEMV (CUDA cores)", "none", "registers", SRC),
              KernelRange(32, None, "NVFP4 dequant to FP16 + cublasGemmEx", "hmma_f16", "memory", SRC))
    ctx = _ctx(gpu, ranges=ranges, dequant="memory", kernel="NVFP4 GEMV / dequant + cuBLAS")
    part = _dense(ctx)
    kv = ctx.default_kv
    small = next(c for c in ctx.model.decode_step(31, 0, kv).parts if c.part is part)
    large = next(c for c in ctx.model.decode_step(32, 0, kv).parts if c.part is part)
    assert small.family == "gemv" and small.copy_bytes == 0
    assert large.family == "copy" and large.copy_bytes == pytest.approx(part.params * 4.0)
    # the dequantize kernel and the GEMM run one after the other: nothing of the shorter term hides
    assert large.t_exposed == pytest.approx(min(large.t_bytes, large.t_compute))
    # a CUDA-core GEMV multiplies on the CUDA cores, not at the tensor-core rate
    assert small.compute_source.startswith("CUDA-core")
    rate = ctx.model.eff.cuda_core_tflops
    assert rate == pytest.approx(64 * 2 * 68 * 1545e6 / 1e12 * efficiency.CUDA_CORE_EFF[0])
    assert small.t_compute - small.t_dequant == pytest.approx(small.flops / (rate * 1e12))


def test_each_efficiency_concept_is_one_lookup_with_its_source():
    eff = _ctx(rtx2080ti()).model.eff
    for fam in ("tiled", "gemv", "copy", "native"):
        v, src = efficiency.bandwidth_eff(eff, "w4a16_nvfp4", fam, 1)
        assert 0 < v <= 1 and src
    assert efficiency.bandwidth_eff(eff, "w4a16_nvfp4", "gemv", 1)[0] != efficiency.bandwidth_eff(
        eff, "w4a16_nvfp4", "tiled", 1)[0]
    for mma in ("hmma_f16", "none"):
        v, src = efficiency.compute_eff(mma, 75, 1)
        assert 0 < v <= 1 and src
    floor, src = efficiency.call_floor("tiled", 75)
    assert floor >= 0 and src
