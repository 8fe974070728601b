"""A microbench calibration in plan: the card's figures and the engine's own kernels' replace the
defaults; our Triton kernels' figures are shown, never put in the engine kernel's place."""

from __future__ import annotations

import pytest
from cost_builders import dense_checkpoint, explanation, h100, rtx3090

from advisor.calibration import Calibration
from advisor.cost import context, efficiency
from advisor.cost.engine_profile import load_engine_memory
from advisor.cost.overrides import Overrides

VLLM = load_engine_memory("vllm")
BF16_KV = VLLM.kv_dtype("bfloat16")


def build(ck, ex, gpu, calibration):
    return context.build(ck, ex, gpu, gpus=1, engine=VLLM, overrides=Overrides(), calibration=calibration)


def test_calibration_replaces_card_figures_and_is_marked_calibrated():
    cal = Calibration(gpu_id="rtx-3090", uuid=None, name="x", measured_at="2026-01-01T00:00:00Z",
                      bandwidth_gbs=850.0, kernel_bandwidth_eff={"bf16": 0.97},
                      mma_tflops={"hmma_bf16": 60.0}, dequant_overhead={"bf16": 0.0})
    ctx = build(dense_checkpoint(), explanation(), rtx3090(), calibration=cal)
    assert ctx.model.bandwidth_gbs == 850.0
    assert ctx.model.eff.bandwidth_eff["bf16"] == 0.97          # cuBLAS: the kernel the engine runs
    assert ctx.model.eff.mma_tflops["hmma_bf16"] == 60.0
    cal_keys = {a.key for a in ctx.assumptions if a.calibrated}
    assert {"dram_bandwidth", "bandwidth_eff.bf16", "mma_tflops.hmma_bf16"} <= cal_keys
    assert all(a.to_json()["source"] == "calibrated" for a in ctx.assumptions if a.calibrated)
    # another GPU's calibration is ignored
    other = build(dense_checkpoint(), explanation(), h100(), calibration=cal)
    assert not any(a.calibrated for a in other.assumptions)


@pytest.mark.parametrize("cls,scheme", [("w4a16_nvfp4", "W4A16-NVFP4"), ("w8a16_fp8", "W8A16-FP8"),
                                        ("w4a16_int4", "W4A16-INT4")])
def test_our_triton_kernels_figures_never_stand_in_for_the_engines_kernel(cls, scheme):
    """microbench's weight-only classes time this project's Triton kernels, not the engine's Marlin: on an
    H200 (2026-12-04) ours streamed at 38-79 % of copy and ran 2.1-2.3x cuBLAS at M = 8192. Taken as the
    engine's figures they cut a W4A16 plan's decode by a third; plan keeps the engine kernel's figures and
    shows ours beside them."""
    cal = Calibration(gpu_id="rtx-3090", uuid=None, name="x", measured_at="2026-01-01T00:00:00Z",
                      bandwidth_gbs=850.0, kernel_bandwidth_eff={cls: 0.43, "bf16": 1.0},
                      mma_tflops={"hmma_bf16": 60.0}, dequant_overhead={cls: 1.31, "bf16": 0.0})
    plain = Calibration(gpu_id="rtx-3090", uuid=None, name="x", measured_at="2026-01-01T00:00:00Z",
                        bandwidth_gbs=850.0, kernel_bandwidth_eff={"bf16": 1.0},
                        mma_tflops={"hmma_bf16": 60.0}, dequant_overhead={"bf16": 0.0})
    ctx = build(dense_checkpoint(scheme), explanation(scheme), rtx3090(), calibration=cal)
    ref = build(dense_checkpoint(scheme), explanation(scheme), rtx3090(), calibration=plain)
    assert {p.kernel_class for p in ctx.model.weights.parts if p.kind == "dense"} == {cls}
    assert ctx.model.eff.bandwidth_eff[cls] == efficiency.BANDWIDTH_EFF[cls][0]
    assert cls not in ctx.model.eff.dequant_overhead and cls not in ctx.dequant_overhead
    shown = {a.key: a for a in ctx.assumptions}[f"own_kernel.{cls}"]
    assert not shown.calibrated and "43.0% of copy" in str(shown.value) and "+131%" in str(shown.value)
    # the whole plan is the one without our kernel's figures: decode step and prefill
    assert ctx.model.decode_step(1, 0, BF16_KV).seconds == pytest.approx(ref.model.decode_step(1, 0, BF16_KV).seconds)
    pf = ctx.model.prefill(4096, 4096, BF16_KV, dequant_overhead=ctx.dequant_overhead)
    pr = ref.model.prefill(4096, 4096, BF16_KV, dequant_overhead=ref.dequant_overhead)
    assert pf.seconds == pytest.approx(pr.seconds) and pf.t_dequant == pytest.approx(pr.t_dequant)
