"""The model against published measurements (field-notes §3-4), with the tolerance each allows.

Sources: vLLM Marlin measured on an RTX 3090 -- decode at 91-94 % of DRAM bandwidth using 13-33 %
of issue slots; prefill (M=8192) at 95-97 % of BF16 cuBLAS; a 280 W power limit costs 6-15 % of
raw TFLOPS; NVFP4 KV holds 8/4.5 the tokens of FP8 KV in equal memory; on Turing NVFP4 weight-only
prefill is slower than FP8 weight-only.
"""

from __future__ import annotations

import pytest
from cost_builders import dense_checkpoint, explanation, rtx2080ti, rtx3090

from advisor.cost import context
from advisor.cost.engine_profile import load_engine_memory
from advisor.cost.efficiency import DEQUANT_OVERLAP
from advisor.cost.overrides import Overrides

VLLM = load_engine_memory("vllm")
BF16_KV = VLLM.kv_dtype("bfloat16")


def _ctx(scheme, gpu=None, **ov):
    gpu = gpu or rtx3090()
    mma = "hmma_f16" if gpu.arch == "turing" else "hmma_bf16"
    return context.build(dense_checkpoint(scheme), explanation(scheme, gpu=gpu.id, mma=mma, kv_mma=mma), gpu,
                         gpus=1, engine=VLLM, overrides=Overrides(**ov))


def _linear_time(ctx, m=8192):
    _, mma, deq = ctx.model._linear_chunk(m, 1, ctx.dequant_overhead)
    return mma + deq


@pytest.mark.parametrize("scheme", ["W4A16-NVFP4", "W8A16-FP8", "W4A16-INT4"])
def test_marlin_decode_streams_at_91_to_94_percent_of_dram(scheme):
    ctx = _ctx(scheme)
    step = ctx.model.decode_step(1, 0, BF16_KV)
    # the Marlin groups (the BF16 head and attention are charged their own measured kernels)
    marlin = [c for c in step.parts if c.family == "tiled"]
    achieved = sum(c.weight_bytes for c in marlin) / sum(c.t_bytes for c in marlin) / 1e9
    assert 0.91 <= achieved / 936.0 <= 0.94
    assert step.bound == "bandwidth" or step.t_bytes >= step.t_compute


def test_marlin_decode_uses_13_to_33_percent_of_issue_slots():
    """Dequant issue time over the streaming time at M=1: the NVFP4 (heaviest unpack) case lands in
    the measured range; no weight-only format exceeds its top (decode stays bandwidth-bound)."""
    fracs = {}
    for scheme in ("W4A16-NVFP4", "W8A16-FP8", "W4A16-INT4"):
        ctx = _ctx(scheme)
        step = ctx.model.decode_step(1, 0, BF16_KV)
        # issue slots: the whole dequant issue time, including the share hidden behind the MMAs
        deq = sum(ctx.model._dequant_seconds(p, e, 1) for p, e in ctx.model.weights.step_elements(1).items()
                  ) / (1 - DEQUANT_OVERLAP[0])
        fracs[scheme] = deq / step.t_bytes
    assert 0.13 <= fracs["W4A16-NVFP4"] <= 0.33
    assert max(fracs.values()) <= 0.33


@pytest.mark.parametrize("scheme", ["W8A16-FP8", "W4A16-INT4", "W4A16-NVFP4"])
def test_marlin_prefill_is_95_to_97_percent_of_bf16_cublas(scheme):
    """field-notes §3: Marlin prefill at M=8192 runs at 95-97 % of BF16 cuBLAS at the same clock. The
    instruction counts come from Marlin's dequant source; DEQUANT_OVERLAP is calibrated to this note."""
    ratio = _linear_time(_ctx("BF16")) / _linear_time(_ctx(scheme))
    assert 0.95 <= ratio <= 0.97


def test_power_limit_280w_costs_6_to_15_percent_of_prefill_compute():
    full = _linear_time(_ctx("BF16"))
    capped = _linear_time(_ctx("BF16", power_limit_w=280.0))
    loss = 1 - full / capped
    assert 0.06 <= loss <= 0.15


def test_nvfp4_kv_pool_holds_8_over_4_5_the_tokens_of_fp8():
    ctx = _ctx("W4A16-NVFP4")
    s = context.Settings(VLLM.kv_dtype("fp8"), 16, 0.92, 2048, 1, 0, True)
    fp8 = ctx.pool_tokens(s)
    nvfp4 = ctx.pool_tokens(s, VLLM.kv_dtype("nvfp4"))
    assert nvfp4 / fp8 == pytest.approx(8 / 4.5, rel=1e-3)
    assert ctx.pool_tokens(s, BF16_KV) * 2 == pytest.approx(fp8, abs=2)


def test_turing_nvfp4_weight_only_prefill_is_slower_than_fp8():
    """Observed on Turing (FastLLM): NVFP4 prefill about a quarter slower than FP8. The model
    reproduces the direction from the dequant issue term alone (magnitude ~5 %, below the
    observation: the observed kernel's tiling is not modelled)."""
    nv = _ctx("W4A16-NVFP4", rtx2080ti()).model.prefill(4096, 2048, BF16_KV)
    f8 = _ctx("W8A16-FP8", rtx2080ti()).model.prefill(4096, 2048, BF16_KV)
    assert nv.seconds > f8.seconds
    # decode goes the other way: fewer bytes win
    assert (_ctx("W4A16-NVFP4", rtx2080ti()).model.decode_step(1, 1024, BF16_KV).seconds
            < _ctx("W8A16-FP8", rtx2080ti()).model.decode_step(1, 1024, BF16_KV).seconds)
