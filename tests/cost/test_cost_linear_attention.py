"""Gated-DeltaNet (linear-attention) layers charged from AIConfigurator's measured gdn_perf tables
(profiles/calibration/aiconfigurator-0.12.0/linear_attention.json) in decode and prefill, carried to
cards other than the measured system, and an estimate labelled as such where no table applies."""

from __future__ import annotations

from dataclasses import replace

import pytest

from advisor.checkpoint.inspect import inspect_checkpoint
from advisor.cost import attention_cost, measured
from advisor.cost import context as ctxmod
from advisor.cost import measured_tables as mt
from advisor.cost.context import Settings
from advisor.cost.engine_profile import load_engine_memory
from advisor.cost.overrides import Overrides
from advisor.gpu_table import get_gpu
from advisor.kernel_path.explain import explain

DEMO = "demo:qwen3.6-27b-nvfp4-mixed"       # 48 GDN layers + 16 full-attention layers
VLLM = load_engine_memory("vllm")


@pytest.fixture(scope="module")
def qwen36():
    return inspect_checkpoint(DEMO)


def _ctx(ck, gpu_id: str):
    gpu = get_gpu(gpu_id)
    return ctxmod.build(ck, explain(ck, gpu, engine="vllm"), gpu, gpus=1, engine=VLLM, overrides=Overrides())


def _settings():
    return Settings(VLLM.kv_dtype("bfloat16"), 8, 0.9, 2048, 1, 0, True)


# ---------------------------------------------------------------- the tables
def test_every_row_has_provenance_and_both_phases_exist():
    for phase in ("decode", "prefill"):
        rows = [t for t in mt.linear_tables(phase) if t.kind == "gdn"]     # Mamba2: test_cost_mamba2.py
        assert {t.system for t in rows} >= {"h200_sxm", "b200_sxm", "rtx_pro_6000_server"}
        for t in rows:
            assert t.src.startswith(f"{mt.PACKAGE} {mt.PACKAGE_VERSION} ") and "gdn_perf.parquet" in t.src
            assert t.system in t.src and t.engine in t.src and t.version in t.src
            assert any("delta_rule" in k for k in t.kernels) and t.floor_us > 0
            assert all(0 < e <= 1 for e in t.e) and list(t.log2_work) == sorted(t.log2_work)
            assert (t.e and t.work == "state_bytes") if phase == "decode" else (t.ns_per_token > 0 and
                                                                                 t.work == "tokens")


def test_decode_layer_time_grows_with_state_bytes_and_names_its_table():
    gpu = get_gpu("h200-sxm")
    small = measured.linear_attention_time(gpu, "decode", 2**20, engine="vllm")
    big = measured.linear_attention_time(gpu, "decode", 2**30, engine="vllm")
    assert small.seconds is not None and big.seconds is not None
    assert small.fixed_s and small.seconds >= small.fixed_s
    assert big.seconds > 10 * small.seconds
    # a large state streams near, never above, the card's bandwidth
    assert 2**30 / (gpu.bandwidth_gbs * 1e9) < big.seconds < 2 * 2**30 / (gpu.bandwidth_gbs * 1e9)
    assert "h200_sxm/linear_attention/vllm" in big.source and "measured on this card" in big.scaling


def test_prefill_is_latency_per_token_of_one_sequence():
    """One sequence's scan: time grows with its tokens, hardly with its heads (the chunks run in turn)."""
    gpu = get_gpu("h200-sxm")
    t = {(n, h): measured.linear_attention_time(gpu, "prefill", n, heads=h, engine="vllm").seconds
         for n in (1024, 8192) for h in (4, 64)}
    assert t[(8192, 4)] > 6 * t[(1024, 4)]
    assert t[(8192, 4)] < t[(8192, 64)] < 2 * t[(8192, 4)]


def test_engine_picks_its_own_kernels():
    gpu = get_gpu("h200-sxm")
    v = measured.linear_attention_time(gpu, "prefill", 8192, heads=16, engine="vllm")
    s = measured.linear_attention_time(gpu, "prefill", 8192, heads=16, engine="sglang")
    assert "/vllm/" in v.source and "/sglang/" in s.source and v.seconds != s.seconds


def test_other_card_carries_the_nearest_system():
    """RTX 5090 (sm_120) is costed from the RTX PRO 6000 Server tables, labelled, its large-state rate at its
    own bandwidth."""
    g5090, pro = get_gpu("rtx-5090"), get_gpu("rtx-pro-6000-bw-server")
    work = 2**31
    got = measured.linear_attention_time(g5090, "decode", work, engine="vllm")
    ref = measured.linear_attention_time(pro, "decode", work, engine="vllm")
    assert got.seconds is not None and "rtx_pro_6000_server" in got.source
    assert "scaled from rtx_pro_6000_server" in got.scaling
    ratio = (ref.seconds - ref.fixed_s) / (got.seconds - got.fixed_s)
    assert ratio == pytest.approx(g5090.bandwidth_gbs / pro.bandwidth_gbs, rel=0.1)


def test_no_table_for_other_kinds_or_unmeasured_architectures():
    assert measured.linear_attention_time(get_gpu("h200-sxm"), "decode", 2**24, kind="kda").seconds is None
    got = measured.linear_attention_time(get_gpu("rtx-2080-ti"), "decode", 2**24)
    assert got.seconds is None and "no measured system" in got.note


# ---------------------------------------------------------------- in the plan's steps
def test_gdn_decode_step_includes_measured_linear_attention(qwen36):
    ctx = _ctx(qwen36, "h200-sxm")
    s = _settings()
    st = ctx.recurrent(s)
    step = ctx.decode(s, 4, 2048)
    inp = step.derived.inputs
    per_layer = measured.linear_attention_time(get_gpu("h200-sxm"), "decode", 4 * st.step_bytes(1) / st.layers,
                                               engine="vllm")
    assert st.layers == 48
    assert inp["t_linear_attention"] == pytest.approx(48 * per_layer.seconds, rel=1e-6)
    # every layer's measured floor on top of streaming the state at no more than the card's bandwidth: the old
    # estimate (bytes / (bandwidth x eff)) had no floor
    gpu = get_gpu("h200-sxm")
    assert inp["t_linear_attention"] >= (48 * per_layer.fixed_s + 4 * st.step_bytes(1) / (gpu.bandwidth_gbs * 1e9)) \
        * (1 - 1e-9)
    assert inp["t_linear_attention"] > 1.5 * 4 * st.step_bytes(1) / ctx.model.rates.bw("kv")
    assert "gdn_perf.parquet" in inp["linear_attention_source"]
    assert "h200_sxm/linear_attention/vllm" in inp["linear_attention_source"]
    assert any("gdn_perf" in x for x in step.sources)


def test_gdn_prefill_chunks_include_the_measured_scan(qwen36):
    ctx = _ctx(qwen36, "h200-sxm")
    stateless = _ctx(replace(qwen36, arch=replace(qwen36.arch, linear_state=None)), "h200-sxm")
    s = _settings()
    p, q = ctx.prefill(s, 8192), stateless.prefill(s, 8192)
    inp = p.derived.inputs
    assert "gdn_perf.parquet" in inp["linear_attention_source"] and "linear_attention_source" not in q.derived.inputs
    floor = mt.linear_tables("prefill")[0].floor_us * 1e-6
    assert inp["t_linear_attention"] > 48 * floor * inp["chunks"]
    assert p.seconds > q.seconds


def test_without_evidence_the_estimate_says_so(qwen36):
    ctx = _ctx(qwen36, "h200-sxm")
    st = ctx.recurrent(_settings())
    model = ctx.model
    dec = attention_cost.linear_decode(model.rates, None, st, 4)
    assert dec.source.startswith("estimate") and dec.t_floor == 0 and dec.calls == 0
    assert dec.t_bytes == pytest.approx(4 * st.step_bytes(1) / model.rates.bw("kv"))
    pre = attention_cost.linear_prefill(model.rates, qwen36.arch, None, model.attn_mma, 2048, 1, set())
    assert pre.source.startswith("estimate") and pre.t_compute > 0
