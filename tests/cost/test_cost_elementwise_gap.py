"""The small kernels between the measured operators (norms, rotary + cache write, activation, residual)
are charged a measured elementwise kernel (vLLM's static_scaled_fp8_quant, AIConfigurator's
scale_matrix_perf, profiles/calibration/aiconfigurator-0.12.0/elementwise.json) at M x hidden, times the
engine's elementwise_kernels_per_layer, instead of a flat 2 us gap each."""

from __future__ import annotations

from dataclasses import replace

import pytest

from advisor.checkpoint.inspect import inspect_checkpoint
from advisor.cost import context as ctxmod
from advisor.cost import measured
from advisor.cost import measured_tables as mt
from advisor.cost.context import Settings
from advisor.cost.engine_profile import load_engine_memory
from advisor.cost.overrides import Overrides
from advisor.gpu_table import get_gpu
from advisor.kernel_path.explain import explain

DEMO = "demo:qwen3.6-27b-nvfp4-mixed"
VLLM = load_engine_memory("vllm")


@pytest.fixture(scope="module")
def ctx():
    ck = inspect_checkpoint(DEMO)
    gpu = get_gpu("h200-sxm")
    return ctxmod.build(ck, explain(ck, gpu, engine="vllm"), gpu, gpus=1, engine=VLLM, overrides=Overrides())


def test_tables_carry_provenance():
    rows = mt.elementwise_tables()
    assert {t.system for t in rows} >= {"h200_sxm", "b200_sxm", "rtx_pro_6000_server", "l40s"}
    for t in rows:
        assert t.src.startswith(f"{mt.PACKAGE} {mt.PACKAGE_VERSION} ") and "scale_matrix_perf.parquet" in t.src
        assert t.system in t.src and f"/{t.engine}/{t.version}/" in t.src and 0 < t.floor_us < 10


def test_elementwise_kernel_time_follows_the_token_count():
    gpu = get_gpu("h200-sxm")
    one = measured.elementwise_time(gpu, 1, 5120)
    many = measured.elementwise_time(gpu, 8192, 5120)
    assert one.seconds == pytest.approx(one.fixed_s, rel=0.2)            # one row: the kernel's floor
    assert many.seconds > 5 * one.seconds
    assert many.seconds > 8192 * 5120 * 3 / (gpu.bandwidth_gbs * 1e9)    # never faster than the bytes allow
    assert "h200_sxm/quantize/vllm" in many.source and "static_scaled_fp8_quant" in many.source


def test_gap_comes_from_the_measured_kernel_and_scales_with_the_count(ctx):
    model = ctx.model
    layers = ctx.checkpoint.arch.num_layers
    calls, seconds, src = model.elementwise(8)
    per = measured.elementwise_time(ctx.gpu, 8, ctx.checkpoint.arch.hidden_size, evidence=model.ops.evidence)
    assert calls == 5 * layers and seconds == pytest.approx(calls * per.seconds)
    assert "scale_matrix_perf" in src and "llama.py" in src           # the table and the engine's count, cited
    doubled = replace(model, overhead={**model.overhead, "elementwise_kernels_per_layer": 10})
    assert doubled.elementwise(8)[1] == pytest.approx(2 * seconds)
    # the step charges them: against the flat gap for the same kernels, the difference is the measured kernels
    # less the flat gaps they replace (the kernels neither measured nor elementwise, never below none)
    flat = replace(model, overhead={**model.overhead, "elementwise_kernels_per_layer": 0})
    kv = VLLM.kv_dtype("bfloat16")
    a, b = model.decode_step(8, 2048, kv), flat.decode_step(8, 2048, kv)
    gap = float(model.overhead["graph_us_per_kernel"]) * 1e-6
    unmeasured = model.kernels_per_step() - a.derived.inputs["measured_kernels"]
    replaced = max(0.0, unmeasured) - max(0.0, unmeasured - calls)
    assert a.seconds - b.seconds == pytest.approx(calls * per.seconds - replaced * gap, rel=1e-6, abs=1e-9)
    assert a.seconds - b.seconds > 0
    assert a.derived.inputs["t_elementwise"] == pytest.approx(seconds)
    assert "scale_matrix_perf" in a.derived.inputs["elementwise_source"]
    assert b.derived.inputs["elementwise_source"].startswith("estimate")


def test_prefill_charges_them_at_the_chunk(ctx):
    s = Settings(VLLM.kv_dtype("bfloat16"), 8, 0.9, 2048, 1, 0, True)
    p = ctx.prefill(s, 2048)
    inp = p.derived.inputs
    assert inp["t_elementwise"] == pytest.approx(ctx.model.elementwise(inp["chunk"])[1])
    assert inp["t_elementwise"] > ctx.model.elementwise(1)[1]


def test_without_evidence_the_flat_gap_stays_and_says_estimate(ctx):
    bare = replace(ctx.model, ops=None)
    assert bare.elementwise(8) == (0.0, 0.0, "")
    step = bare.decode_step(1, 1024, VLLM.kv_dtype("bfloat16"))
    assert step.derived.inputs["elementwise_source"].startswith("estimate")
