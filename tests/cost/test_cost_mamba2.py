"""Mamba2 layers (Nemotron-H) in a decode step: the conv update charged from AIConfigurator's measured
mamba2_perf rows (TRT-LLM's kernel standing in, labelled), the SSM update and the gated norm at least the
measured small kernel each (advisor.cost.mamba2_cost), and the state-bytes estimate where no table applies.
The old code charged a Mamba2 layer only its state bytes over the bandwidth: no per-kernel floor."""

from __future__ import annotations

import pytest

from advisor.checkpoint.inspect import inspect_checkpoint
from advisor.cost import attention_cost, context, mamba2_cost, measured
from advisor.cost import measured_tables as mt
from advisor.cost.engine_profile import load_engine_memory
from advisor.cost.overrides import Overrides
from advisor.gpu_table import get_gpu
from advisor.kernel_path.explain import explain
from tests.conftest import ROOT

NANO = ROOT / "benchmarks" / "validation_configs" / "nemotron-3-nano-30b-a3b-fp8"


@pytest.fixture(scope="module")
def nano():
    return inspect_checkpoint(str(NANO))


def _ctx(ck, gpu_id: str, engine: str = "vllm", gpus: int = 1):
    g = get_gpu(gpu_id)
    return context.build(ck, explain(ck, g, gpus=gpus, engine=engine), g, gpus=gpus,
                         engine=load_engine_memory(engine), overrides=Overrides())


def test_mamba2_rows_are_the_measured_decode_conv_update():
    rows = [t for t in mt.linear_tables("decode") if t.kind == "mamba2"]
    assert {t.system for t in rows} >= {"h100_sxm", "h200_sxm", "b200_sxm", "rtx_pro_6000_server"}
    for t in rows:
        assert t.src.startswith(f"{mt.PACKAGE} {mt.PACKAGE_VERSION} ") and "mamba2_perf.parquet" in t.src
        assert t.system in t.src and t.engine == "trtllm" and t.version in t.src
        assert t.kernels == ("causal_conv1d_update",) and t.work == "conv_bytes" and t.floor_us > 0
        assert all(0 < e <= 1 for e in t.e) and list(t.log2_work) == sorted(t.log2_work)
    assert not [t for t in mt.linear_tables("prefill") if t.kind == "mamba2"]   # the scan is not measured


def test_gdn_and_mamba2_tables_never_stand_in_for_each_other():
    gpu = get_gpu("h200-sxm")
    gdn = measured.linear_attention_time(gpu, "decode", 2**24, kind="gdn", engine="trtllm")
    m2 = measured.linear_attention_time(gpu, "decode", 2**24, kind="mamba2", engine="vllm")
    assert "gdn_perf" in gdn.source and "mamba2_perf" in m2.source
    assert "trtllm" in m2.note                             # vLLM asked, TRT-LLM's kernel stands in: labelled


@pytest.mark.parametrize("gpu_id, engine", [("b200", "sglang"), ("h200-sxm", "vllm"), ("rtx-5090", "vllm")])
def test_decode_step_charges_three_measured_kernels_per_mamba2_layer(nano, gpu_id, engine):
    ctx = _ctx(nano, gpu_id, engine)
    kv = ctx.default_kv
    st = ctx.model.recurrent(1, kv)
    assert st is not None and st.kind == "mamba2" and st.layers == 23
    step = ctx.model.decode_step(1, 1024, kv)
    inp = step.derived.inputs
    gpu = get_gpu(gpu_id)
    small = measured.elementwise_time(gpu, 1, 4096, engine=engine)
    conv = measured.linear_attention_time(gpu, "decode", 2 * st.conv_bytes, kind="mamba2", engine=engine)
    # each layer: the measured conv update + two kernels at least the measured small kernel; the old charge
    # was the state bytes alone (a few hundred ns per layer at batch 1)
    floor = st.layers * (conv.seconds + 2 * small.fixed_s)
    assert inp["t_linear_attention"] >= floor * (1 - 1e-9)
    old = 2 * st.state_bytes / ctx.model.rates.bw("kv")
    assert inp["t_linear_attention"] >= old + st.layers * 2 * small.fixed_s
    src = inp["linear_attention_source"]
    assert "mamba2_perf.parquet" in src and "causal_conv1d_update" in src and "selective_state_update" in src
    assert "mamba_mixer2.py:949@0.33.0" in src and "mamba.py:756@0.5.23" in src and "estimate" in src
    assert inp["measured_kernels"] >= st.layers * mamba2_cost.DECODE_KERNELS


def test_large_batch_streams_the_state_at_no_more_than_the_bandwidth(nano):
    ctx = _ctx(nano, "b200", "sglang")
    kv = ctx.default_kv
    st = ctx.model.recurrent(1, kv)
    inp = ctx.model.decode_step(256, 1024, kv).derived.inputs
    gpu = get_gpu("b200")
    assert inp["t_linear_attention"] > 256 * 2 * st.state_bytes / (gpu.bandwidth_gbs * 1e9)


def test_without_evidence_the_estimate_says_so(nano):
    ctx = _ctx(nano, "h200-sxm")
    st = ctx.model.recurrent(1, ctx.default_kv)
    dec = attention_cost.linear_decode(ctx.model.rates, None, st, 4, 1, 4096)
    assert dec.source.startswith("estimate") and dec.t_floor == 0 and dec.calls == 0
    turing = _ctx(nano, "rtx-2080-ti")
    inp = turing.model.decode_step(1, 1024, turing.default_kv).derived.inputs
    assert inp["linear_attention_source"].startswith("estimate")
