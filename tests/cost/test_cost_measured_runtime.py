"""Issue 17 part b: `plan` charges measured operators (AIConfigurator's tables, advisor.cost.measured) at
run time: GEMM per module group and M with its per-call floor, MoE layers with their routing/permute cost,
attention and TP all-reduce from measured curves, host time per engine, TTFT as a server delivers it,
and every speed figure names its measured source or says it is an estimate."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from advisor.services.analysis import explain_and_plan
from advisor.calibration import Calibration
from advisor.checkpoint.inspect import inspect_checkpoint
from advisor.cli import main
from advisor.cost import context, measured, serving
from advisor.cost import measured_tables as mt
from advisor.cost.engine_profile import load_engine_memory
from advisor.cost.overrides import Overrides
from advisor.cost.plan_doc import to_doc
from advisor.cost.workload import get_workload
from advisor.gpu_table import get_gpu
from advisor.kernel_path.explain import explain
from tests.conftest import ROOT

CONFIGS = ROOT / "benchmarks" / "validation_configs"
TABLES = "aiconfigurator-core 0.12.0"


def _ctx(config, gpu, engine="vllm", gpus=1, **ov):
    ck = inspect_checkpoint(config if config.startswith("demo:") else str(CONFIGS / config))
    g = get_gpu(gpu)
    ex = explain(ck, g, gpus=gpus, engine=engine)
    return context.build(ck, ex, g, gpus=gpus, engine=load_engine_memory(engine), overrides=Overrides(**ov))


def _group(step, suffix):
    return next(c for c in step.parts if c.part.name.endswith(suffix))


def _plan_json(capsys, *argv):
    assert main(["plan", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


# ---------------------------------------------------------------- 1. efficiencies by arch, kernel and M
def test_efficiencies_differ_by_arch_kernel_and_m():
    """The old model streamed every 16-bit GEMM at one constant (0.925) on every GPU and at every M."""
    h100 = _ctx("qwen3-8b", "h100-sxm")
    l40s = _ctx("qwen3-8b", "l40s")
    kv = h100.default_kv
    down = lambda ctx, b: _group(ctx.model.decode_step(b, 1024, kv), "mlp.down_proj")   # noqa: E731
    by_arch = {down(h100, 1).bandwidth_eff[0], down(l40s, 1).bandwidth_eff[0]}
    by_m = {down(h100, 1).bandwidth_eff[0], down(h100, 64).bandwidth_eff[0]}
    fp8 = _ctx("qwen3-8b-fp8", "h100-sxm")
    f8 = _group(fp8.model.decode_step(1, 1024, fp8.default_kv), "mlp.down_proj")
    assert len(by_arch) == 2 and len(by_m) == 2
    assert f8.bandwidth_eff[0] != down(h100, 1).bandwidth_eff[0]
    for c in (down(h100, 1), down(l40s, 1), f8):
        assert TABLES in c.measured and "measured" in c.bandwidth_eff[1]
    assert "h100_sxm" in down(h100, 1).measured and "l40s" in down(l40s, 1).measured
    assert "fp8_block" in f8.measured               # block-scaled FP8 is charged the block-scaled kernel


def test_prefill_compute_efficiency_is_measured_not_099():
    ctx = _ctx("qwen3-8b", "h100-sxm")
    pf = ctx.model.prefill(8192, 8192, ctx.default_kv)
    down = next(c for c in pf.parts if c.part.name.endswith("mlp.down_proj"))
    peak = ctx.model.eff.peak_tflops["wgmma_bf16"] * 1e12
    achieved = down.flops / down.t_compute / peak
    assert 0.5 < achieved < 0.95                    # a whole GEMM measured well below the 0.99 the model assumed


# ---------------------------------------------------------------- 2. the per-GEMM floor
@pytest.mark.parametrize("gpu", ["h100-sxm", "b200", "rtx-5090", "rtx-4090", "a100-80gb-sxm"])
def test_gemm_at_m1_is_never_cheaper_than_its_measured_floor(gpu):
    ctx = _ctx("qwen3-8b", gpu)
    step = ctx.model.decode_step(1, 1024, ctx.default_kv)
    gemms = [c for c in step.parts if c.measured and c.part.gemm and c.part.kind != "embed"]
    assert gemms
    for c in gemms:
        assert c.t_floor > 0 and c.seconds >= c.t_floor
        assert c.t_floor / c.calls >= 1.5e-6         # the smallest measured GEMM floor is a few microseconds
    assert step.seconds > sum(c.t_floor for c in gemms)


@pytest.mark.parametrize("scheme", ["BF16", "W8A8-FP8", "W4A16-NVFP4"])
def test_floors_do_not_shrink_with_the_weights(scheme):
    """A narrow model reads almost nothing, yet each GEMM call still costs its measured floor: the step of
    a 4-bit copy is no cheaper than its floors (the old model charged bytes only)."""
    from cost_builders import dense_checkpoint, explanation

    g = get_gpu("h100-sxm")
    mma = {"BF16": "wgmma_bf16", "W8A8-FP8": "wgmma_e4m3", "W4A16-NVFP4": "wgmma_bf16"}[scheme]
    ck = dense_checkpoint(scheme, layers=8, hidden=256, inter=512, heads=4, kv_heads=4, head_dim=64, vocab=1024)
    ctx = context.build(ck, explanation(scheme, gpu=g.id, mma=mma, kv_mma="wgmma_bf16"), g, gpus=1,
                        engine=load_engine_memory("vllm"), overrides=Overrides())
    step = ctx.model.decode_step(1, 16, ctx.default_kv)
    layers = [c for c in step.parts if c.part.kind == "dense"]
    assert len(layers) == 4 and all(c.calls == 8 for c in layers)
    for c in layers:
        assert c.t_floor / c.calls >= 1.5e-6 and c.seconds < 1.5 * c.t_floor     # the floor is the call


def test_blackwell_cutlass_fp8_carries_its_15_to_20_us_floor():
    """B's measured fact: vLLM's CUTLASS FP8 GEMM at M=1 costs 15-20 µs per call on B200/B300/GB200,
    however small the weight; a per-tensor FP8 checkpoint pays it per merged call."""
    ctx = _ctx("nemotron-3-nano-30b-a3b-fp8", "b200")
    step = ctx.model.decode_step(1, 512, ctx.default_kv)
    qkv = [c for c in step.parts if c.part.role == "attn_qkv"]
    assert qkv and all("CutlassFP8" in c.measured for c in qkv)
    per_call = sum(c.t_floor for c in qkv) / sum(c.calls for c in qkv)
    assert 15e-6 <= per_call <= 22e-6


def test_merged_projections_pay_one_floor_per_layer():
    """vLLM runs q/k/v as one QKVParallelLinear call per layer (and gate/up as one): one floor, not three."""
    ctx = _ctx("qwen3-8b", "h100-sxm")
    step = ctx.model.decode_step(1, 1024, ctx.default_kv)
    qkv = [c for c in step.parts if c.part.role == "attn_qkv"]
    assert len(qkv) == 3 and sum(c.calls for c in qkv) == pytest.approx(36)


# ---------------------------------------------------------------- 3. MoE routing and TP all-reduce
def test_tp8_moe_decode_at_batch_1_carries_allreduce_and_routing_costs():
    ctx = _ctx("demo:qwen3-30b-a3b-fp8", "h200-sxm", gpus=8, tp=8)
    step = ctx.model.decode_step(1, 1024, ctx.default_kv, tp=8)
    i = step.derived.inputs
    assert TABLES in i["allreduce_source"] and "TP8" in i["allreduce_source"]
    per_ar, _ = ctx.model.allreduce(1, 8, True)
    layers = ctx.checkpoint.arch.num_layers
    assert step.t_fixed >= layers * 2 * per_ar > 0
    experts = [c for c in step.parts if c.part.kind == "expert"]
    assert experts and all("moe" in c.measured for c in experts)
    routing = sum(c.t_floor for c in experts)
    assert routing >= ctx.model.moe_layers() * 10e-6         # the measured routing/permute cost per layer
    # fixed costs do not shrink with the weights: TP 8 is far from 8x TP 1
    one = _ctx("demo:qwen3-30b-a3b-fp8", "h200-sxm").model.decode_step(1, 1024, ctx.default_kv)
    assert one.seconds / step.seconds < 4


def test_nvfp4_gain_over_fp8_is_smaller_than_the_byte_ratio_once_floors_count():
    nv = _ctx("demo:qwen3-30b-a3b-nvfp4", "b200")
    f8 = _ctx("demo:qwen3-30b-a3b-fp8", "b200")
    a, b = nv.model.decode_step(1, 1024, nv.default_kv), f8.model.decode_step(1, 1024, f8.default_kv)
    bytes_ratio = b.bytes_read / a.bytes_read
    assert 1.0 < b.seconds / a.seconds < 0.9 * bytes_ratio


def test_fastllm_all_reduce_is_nccl():
    got = measured.allreduce_time(get_gpu("rtx-2080-ti"), 2, 8192, link_kind="pcie", link_gbs=15.76,
                                  engine="fastllm", graph=False)
    assert "nccl-tests" in got.source and "fastllm-multicuda.cu:3098" in got.note


# ---------------------------------------------------------------- host time per engine
def _tiny(engine):
    ck = inspect_checkpoint("demo:qwen3-8b-nvfp4")
    arch = replace(ck.arch, num_layers=1)
    ck = replace(ck, arch=arch, modules=tuple(replace(m, count=1, params=m.params // max(m.count, 1),
                                                      stored_bytes=m.stored_bytes // max(m.count, 1))
                                              for m in ck.modules))
    g = get_gpu("h100-sxm")
    ex = explain(ck, g, engine=engine)
    return context.build(ck, ex, g, gpus=1, engine=load_engine_memory(engine), overrides=Overrides())


def test_host_time_overlaps_the_gpu_where_the_engine_schedules_ahead():
    v = _tiny("vllm")
    step = v.model.decode_step(1, 16, v.default_kv)
    host = float(v.engine.overhead["host_us_per_step"]) * 1e-6
    i = step.derived.inputs
    gap_s = v.engine.overhead["graph_us_per_kernel"] * 1e-6
    ew_calls, ew_s, _ = v.model.elementwise(1)          # the measured kernels between the operators
    gaps = max(0.0, v.model.kernels_per_step() - i["measured_kernels"] - ew_calls) * gap_s + ew_s
    assert step.t_host == host and step.seconds == pytest.approx(max(i["t_gpu"] + gaps, host))
    assert step.seconds < i["t_gpu"] + gaps + host                     # overlapped, not added
    src = next(a for a in v.assumptions if a.key == "host_overlap")
    assert src.value == "yes" and "vllm/config/vllm.py:1685" in src.source
    f = _tiny("fastllm")
    fs = f.model.decode_step(1, 16, f.default_kv, graphs=False)
    assert next(a for a in f.assumptions if a.key == "host_overlap").value == "no"
    assert fs.seconds >= fs.derived.inputs["t_gpu"] + float(f.engine.overhead["host_us_per_step"]) * 1e-6


# ---------------------------------------------------------------- attention and KV stand-ins
def test_decode_attention_is_measured_and_a_kv_dtype_without_a_table_is_named():
    ctx = _ctx("qwen3-8b", "rtx-3090")                # A100 evidence: BF16 KV kernels only
    fp8 = ctx.engine.kv_dtype("fp8")
    step = ctx.model.decode_step(1, 8192, fp8)
    src = step.derived.inputs["attention_source"]
    assert "a100_sxm" in src and "stands in" in src and "unpack" in src
    bf16 = ctx.model.decode_step(1, 8192, ctx.engine.kv_dtype("bfloat16"))
    assert bf16.derived.inputs["t_attention"] > step.derived.inputs["t_attention"] > 0


# ---------------------------------------------------------------- same-named groups
@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_a_pattern_split_by_exclusions_costs_each_scheme_with_its_own_kernel(engine):
    """Nemotron-3 Nano NVFP4 keeps six layers' mixer.in_proj BF16: two groups share one name. Both were
    charged the BF16 decision (and a measured BF16 GEMM at twice the real bytes)."""
    ctx = _ctx("nemotron-3-nano-30b-a3b-nvfp4", "b200", engine=engine)
    parts = [p for p in ctx.model.weights.parts if p.name.endswith("mixer.in_proj")]
    assert {p.kernel_class for p in parts} == {"a4_native", "bf16"}


# ---------------------------------------------------------------- microbench overrides
def test_microbench_calibration_overrides_the_measured_streaming_rate():
    cal = Calibration(gpu_id="h100-sxm", uuid=None, name="x", measured_at="2026-01-01T00:00:00Z",
                      bandwidth_gbs=3000.0, kernel_bandwidth_eff={"bf16": 0.5})
    ck = inspect_checkpoint(str(CONFIGS / "qwen3-8b"))
    g = get_gpu("h100-sxm")
    ex = explain(ck, g, engine="vllm")
    base = context.build(ck, ex, g, gpus=1, engine=load_engine_memory("vllm"), overrides=Overrides())
    calib = context.build(ck, ex, g, gpus=1, engine=load_engine_memory("vllm"), overrides=Overrides(),
                          calibration=cal)
    kv = base.default_kv
    d0 = _group(base.model.decode_step(1, 1024, kv), "mlp.down_proj")
    d1 = _group(calib.model.decode_step(1, 1024, kv), "mlp.down_proj")
    assert "microbench" in d1.measured and d1.seconds > 1.5 * d0.seconds


# ---------------------------------------------------------------- carrying to another card
def test_carrying_is_exact_on_the_measured_system_and_latency_does_not_scale_with_bandwidth():
    s = mt.systems()["h100_sxm"]
    g = get_gpu("h100-sxm")
    same = measured.Evidence(g, s, "same card", "")
    as_other = measured.Evidence(g, s, "same compute capability", "")
    for m_, n, k in ((1, 1024, 1024), (1, 8192, 8192), (256, 4096, 4096), (8192, 4096, 14336)):
        a = measured.gemm_time(g, "bf16", m_, n, k, engine="vllm", evidence=same)
        b = measured.gemm_time(g, "bf16", m_, n, k, engine="vllm", evidence=as_other)
        assert b.seconds == pytest.approx(a.seconds, rel=1e-9)
    # a card with a sixth of the bandwidth: small-shape latency is carried as time, not divided by e, so
    # the same kernel comes closer to the card's (lower) roofline there
    spark = get_gpu("dgx-spark-gb10")
    ev = measured.evidence_for(spark)
    there = measured.gemm_time(spark, "a4_native", 1, 2688, 3712, engine="vllm", evidence=ev)
    home = measured.gemm_time(get_gpu(ev.system.gpu), "a4_native", 1, 2688, 3712, engine="vllm")
    assert ev.relation == "same architecture" and there.efficiency > home.efficiency


# ---------------------------------------------------------------- 4. TTFT as a server delivers it
def test_ttft_alone_and_under_load_are_separate_and_sourced(capsys):
    doc = _plan_json(capsys, "demo:qwen3-8b-nvfp4", "--gpu", "h100-sxm", "--workload", "agents")
    sv = doc["predictions"]["serving"]
    pf = doc["predictions"]["prefill_seconds"]
    assert sv["concurrency"] == 8
    assert sv["ttft_loaded_s"] > sv["ttft_isolated_s"] > pf        # per-request cost, then queueing and mixing
    d = doc["derivations"]
    assert "request_overhead_s" in d["ttft_isolated"]["inputs"]
    assert "scheduler.py" in d["ttft_loaded"]["source"] and "estimate" in d["ttft_loaded"]["source"]
    assert d["ttft_loaded"]["inputs"]["prefill_tokens_per_step"] < d["prefill_seconds"]["inputs"]["chunk"]


def test_loaded_ttft_grows_with_concurrency():
    ck = inspect_checkpoint("demo:qwen3-8b-nvfp4")
    g = get_gpu("h100-sxm")
    _, plan = explain_and_plan(ck, g, gpus=1, engine="vllm", workload=get_workload("agents"))
    ctx = _ctx("demo:qwen3-8b-nvfp4", "h100-sxm")
    from advisor.cost.tuning import tune
    s = tune(ctx, get_workload("agents")).settings
    ttft = [serving.serve(ctx, s, 4096, 512, c, 4352).ttft_loaded_s for c in (1, 4, 16, 64)]
    assert ttft == sorted(ttft) and ttft[-1] > 1.5 * ttft[0]
    assert plan.predictions.serving is not None


# ---------------------------------------------------------------- 5. --context decides the batch cap
def test_context_decides_the_batch_cap(capsys):
    doc = _plan_json(capsys, "demo:qwen3-8b-nvfp4", "--gpu", "rtx-3090", "--max-batch", "16", "--context", "1280")
    p = doc["predictions"]
    assert "16" in p["decode_aggregate_tok_s"]
    assert p["max_concurrency_at_context"] >= 16 and doc["workload"]["context_tokens"] == 1280


# ---------------------------------------------------------------- done: every figure names its source
def test_every_speed_figure_names_its_measured_source(capsys):
    doc = _plan_json(capsys, "demo:qwen3-30b-a3b-nvfp4", "--gpu", "b200", "--workload", "agents")
    d = doc["derivations"]
    for key in ("decode_tok_s", "prefill_seconds", "ttft_isolated", "ttft_loaded", "served_output_tok_s"):
        assert TABLES in d[key]["source"], key
    for phase in ("decode_linear_layers", "prefill_linear_layers"):
        for g in d[phase]["inputs"]["module_groups"]:
            if g["gemm"]:
                assert TABLES in g["measured_source"] or g["measured_source"].startswith("none: estimate"), g
    ev = next(a for a in doc["assumptions"] if a["key"] == "measured_evidence")
    assert ev["value"] == "b200_sxm"


def test_a_card_without_measured_evidence_says_its_speeds_are_estimates(capsys):
    doc = _plan_json(capsys, "demo:qwen3-8b-nvfp4", "--gpu", "rtx-2080-ti")
    d = doc["derivations"]
    assert "no measured operator" in d["decode_tok_s"]["source"]
    assert "estimate" in d["decode_tok_s"]["inputs"]["attention_source"]
    ev = next(a for a in doc["assumptions"] if a["key"] == "measured_evidence")
    assert ev["value"] == "none" and "turing" in ev["source"]


def test_the_cost_tab_says_what_the_speeds_stand_on():
    ck = inspect_checkpoint("demo:qwen3-8b-nvfp4")
    for gid, words in (("rtx-5090", "measured operators of rtx_pro_6000_server"), ("rtx-2080-ti", "estimates")):
        _, plan = explain_and_plan(ck, get_gpu(gid), gpus=1, engine="vllm", workload=get_workload("agents"))
        rows = dict(next(b for b in to_doc(plan).blocks if getattr(b, "title", "") == "Predictions").pairs)
        assert rows["speeds from"].startswith(words)
        assert "TTFT, alone" in rows
        streams = plan.predictions.serving.concurrency
        assert (f"TTFT, {streams} streams" in rows) == (streams > 1)
    assert streams == 1                              # the 2080 Ti's pool holds one 32k-token request
