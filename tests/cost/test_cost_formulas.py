"""Each formula of the cost model on hand-computed cases."""

from __future__ import annotations

import pytest
from cost_builders import dense_checkpoint, explanation, h100, moe_checkpoint, rtx2080ti, rtx3090

from advisor.checkpoint.model import ArchInfo, MLAInfo
from advisor.cost import (
    context,
    efficiency,
    gpu_efficiency,
    interconnect,
    kv,
    memory,
    spec_concurrency,
    speculative,
    weights,
)
from advisor.cost.efficiency import DEQUANT_INSTR, DEQUANT_OVERLAP
from advisor.cost.engine_profile import GIB, MIB, load_engine_memory
from advisor.cost.overrides import Overrides

VLLM = load_engine_memory("vllm")
SGLANG = load_engine_memory("sglang")
BF16_KV = VLLM.kv_dtype("bfloat16")
FP8_KV = VLLM.kv_dtype("fp8")
NVFP4_KV = VLLM.kv_dtype("nvfp4")


def build(ck, ex, gpu, **ov):
    gpus, engine, cal = ov.pop("gpus", 1), ov.pop("engine", VLLM), ov.pop("calibration", None)
    return context.build(ck, ex, gpu, gpus=gpus, engine=engine, overrides=Overrides(**ov), calibration=cal)


def estimate(ctx):
    """The context costed without measured operator evidence: the estimate formulas a card without a
    measured system of its architecture (Turing) gets (the measured path: test_cost_measured_runtime.py)."""
    from dataclasses import replace

    return replace(ctx, model=replace(ctx.model, ops=None), _cache={})


CE = efficiency.compute_eff("hmma_bf16", 86)[0]


# ---------------------------------------------------------------- weights
def test_expected_distinct_experts_follows_uniform_routing():
    wm = weights.build(moe_checkpoint(experts=128, top_k=8), explanation())
    assert wm.experts_fraction(1) == pytest.approx(8 / 128)
    assert wm.experts_fraction(2) == pytest.approx(1 - (120 / 128) ** 2)
    assert wm.experts_fraction(64) == pytest.approx(1 - (120 / 128) ** 64)
    assert wm.experts_fraction(10_000) == pytest.approx(1.0)


def test_decode_bytes_count_experts_touched_lm_head_and_embedding_rows():
    ck = moe_checkpoint(experts=128, top_k=8)
    wm = weights.build(ck, explanation())
    by_role = {r: sum(m.stored_bytes for m in ck.modules if m.role == r) for r in {m.role for m in ck.modules}}
    dense = by_role["attn_qkv"] + by_role["attn_o"] + by_role["router"]
    vocab = ck.arch.vocab_size
    for b in (1, 4):
        frac = 1 - (1 - 8 / 128) ** b
        want = dense + by_role["expert"] * frac + by_role["lm_head"] + by_role["embed"] * b / vocab
        assert sum(wm.step_bytes(b).values()) == pytest.approx(want)
    # TP splits what each GPU reads, but for the router gate every rank holds whole (ReplicatedLinear)
    whole = sum(wm.step_bytes(1).values())
    assert sum(wm.step_bytes(1, tp=2).values()) == pytest.approx((whole - by_role["router"]) / 2 + by_role["router"])


def test_flops_per_token_use_top_k_of_experts():
    ck = moe_checkpoint(experts=64, top_k=4)
    wm = weights.build(ck, explanation())
    expert_params = sum(m.params for m in ck.modules if m.role == "expert")
    got = sum(v for p, v in wm.flops_per_token().items() if p.kind == "expert")
    assert got == pytest.approx(2 * expert_params * 4 / 64)


def test_checkpoint_scheme_becomes_the_explained_effective_scheme():
    ck = dense_checkpoint("W4A4-NVFP4")
    ex = explanation("W4A4-NVFP4")
    ex = ex.__class__(**{**ex.__dict__, "decisions": tuple(
        d.__class__(**{**d.__dict__, "effective_scheme": "W4A16-NVFP4", "dequant": "registers"})
        if d.layer_class == "dense_linear" else d for d in ex.decisions)})
    wm = weights.build(ck, ex)
    dense = [p for p in wm.parts if p.kind == "dense"]
    assert {p.kernel_class for p in dense} == {"w4a16_nvfp4"}
    assert {p.mma for p in dense} == {"hmma_bf16"}


def test_tied_head_reads_the_embedding_matrix():
    ck = dense_checkpoint("BF16")
    ck = ck.__class__(**{**ck.__dict__, "modules": tuple(m for m in ck.modules if m.role != "lm_head")})
    wm = weights.build(ck, explanation("BF16"))
    emb = next(m for m in ck.modules if m.role == "embed")
    assert wm.bytes_of("lm_head") == emb.stored_bytes


# ---------------------------------------------------------------- KV
def test_kv_bytes_per_token_dense_gqa():
    arch = dense_checkpoint().arch      # 32 layers, 8 KV heads x 128
    lay = kv.layout(arch)
    assert lay.bytes_per_token(BF16_KV) == 32 * 2 * 8 * 128 * 2
    assert lay.bytes_per_token(FP8_KV) == 32 * 2 * 8 * 128 * 1
    assert lay.bytes_per_token(NVFP4_KV) == pytest.approx(32 * 2 * 8 * 128 * 4.5 / 8)
    # TP 2 halves the heads per GPU; TP 16 > 8 KV heads keeps one replicated head per GPU
    assert kv.layout(arch, 2).bytes_per_token(BF16_KV) == 32 * 2 * 4 * 128 * 2
    assert kv.layout(arch, 16).bytes_per_token(BF16_KV) == 32 * 2 * 1 * 128 * 2


def test_kv_hybrid_counts_only_full_attention_layers():
    arch = dense_checkpoint(layers=48, linear_layers=36).arch
    assert kv.layout(arch).bytes_per_token(BF16_KV) == 12 * 2 * 8 * 128 * 2


def test_kv_mla_counts_the_latent_once():
    arch = ArchInfo(num_layers=61, hidden_size=7168, num_attention_heads=128, num_kv_heads=128, head_dim=128,
                    vocab_size=129280, kv_layers=61,
                    mla=MLAInfo(kv_lora_rank=512, qk_rope_head_dim=64))
    assert kv.layout(arch).bytes_per_token(BF16_KV) == 61 * (512 + 64) * 2
    assert kv.layout(arch, 8).bytes_per_token(BF16_KV) == 61 * (512 + 64) * 2   # replicated per rank


def test_per_token_head_scales_add_bytes():
    arch = dense_checkpoint().arch
    int8 = VLLM.kv_dtype("int8_per_token_head")
    assert kv.layout(arch).bytes_per_token(int8) == 32 * (2 * 8 * 128 * 1 + 2 * 8 * 4)


def test_sliding_window_request_bytes_and_max_context():
    arch = ArchInfo(num_layers=4, hidden_size=256, num_attention_heads=4, num_kv_heads=1, head_dim=64,
                    vocab_size=1000, kv_layers=1, sliding_window=100, sliding_window_layers=3,
                    max_position_embeddings=10**6)
    lay = kv.layout(arch)
    per = 2 * 64 * 2            # one KV head, BF16, per layer
    assert lay.request_bytes(BF16_KV, 50) == per * 4 * 50
    assert lay.request_bytes(BF16_KV, 1000) == per * (1000 + 3 * 100)
    pool = per * (1000 + 300) * 2
    assert lay.max_context(BF16_KV, pool, 2) == pytest.approx(1000)
    assert lay.max_concurrency(BF16_KV, pool, 1000) == 2


def test_max_context_is_pool_over_batch_capped_by_the_model():
    arch = dense_checkpoint(max_pos=8192).arch
    lay = kv.layout(arch)
    per = lay.bytes_per_token(FP8_KV)
    assert lay.max_context(FP8_KV, per * 4000, 2) == pytest.approx(2000)
    assert lay.max_context(FP8_KV, per * 100000, 1) == 8192


# ---------------------------------------------------------------- memory
def test_sglang_reserve_and_default_share_follow_memory_hook():
    # 24 GiB tier: chunked 4096, graph max_bs 48 (tp < 4)
    res = memory.sglang_reserved_mb(SGLANG, 24.0, 4096, 48, 1, True)
    prefill_graphs = 5 + len(range(512, 4097, 256))
    assert res.value == 512 + 1.5 * 4096 + 128 + 2 * 48 + 8 * prefill_graphs
    share = memory.default_share(SGLANG, 24 * GIB, 4096, 48, 1, True)
    assert share.value == round((24576 - res.value) / 24576, 3)
    # above 60 GiB the reserve is at least 10 GiB
    assert memory.sglang_reserved_mb(SGLANG, 80.0, 2048, 8, 1, False).value == 10240


def _inputs(ck, share, tokens, max_batch, tp=1, graphs=True, vram=24 * GIB):
    wm = weights.build(ck, explanation())
    return memory.MemoryInputs(ck.arch, wm, vram, share, tp, tokens, max_batch, graphs, (8, 6)), wm


def test_vllm_pool_is_share_minus_every_profiled_term():
    ck = dense_checkpoint()
    x, wm = _inputs(ck, 0.92, 2048, 256)
    b = memory.budget(VLLM, x)
    t = dict(b.terms)
    a = ck.arch
    # one layer's live set at T = max_num_batched_tokens (profile_run), 16-bit
    qkv = (a.num_attention_heads + 2 * a.num_kv_heads) * a.head_dim
    act = 2048 * (2 * a.hidden_size + max(qkv, 3 * a.intermediate_size)) * 2
    sampler = min(2048, 256) * a.vocab_size * 18          # bf16 + fp32 logits, probs, noise, divided
    sizes = [1, 2, 4] + list(range(8, 256, 8)) + list(range(256, 513, 16))   # min(2 x 256, 512, 2048)
    graphs = 512 * (2 * a.hidden_size + max(qkv, 3 * a.intermediate_size)) * 2 \
        + 0.25 * a.num_layers * MIB * (len(sizes) - 1)
    assert t["weights"].value == pytest.approx(wm.resident_bytes())
    assert t["non_torch"].value == pytest.approx(0.1 * GIB)
    assert t["activation_peak"].value == pytest.approx(act)
    assert t["sampler"].value == pytest.approx(sampler)
    assert t["cuda_graphs"].value == pytest.approx(graphs)
    assert "moe_workspace" not in t                       # a dense model has no fused-MoE workspace
    reserve = 0.1 * GIB + act + sampler + graphs
    assert b.reserve_bytes.value == pytest.approx(reserve)
    assert b.pool_bytes.value == pytest.approx(24 * GIB * 0.92 - wm.resident_bytes() - reserve)
    # every term names its source
    assert all(d.source for _, d in b.terms)


def test_sglang_pool_excludes_activations_from_the_share():
    ck = dense_checkpoint()
    x, wm = _inputs(ck, 0.8, 4096, 48)
    b = memory.budget(SGLANG, x)
    ctx_gib = 0.5 * 0.8                                   # the baseline is taken after the CUDA context
    assert b.pool_bytes.value == pytest.approx(24 * GIB * 0.8 - wm.resident_bytes() - ctx_gib * GIB)
    assert b.reserve_bytes.value > 4096 * 1.5 * MIB


# ---------------------------------------------------------------- roofline
def _single_part_checkpoint(scheme, layers=1):
    return dense_checkpoint(scheme, layers=layers, hidden=1024, inter=1024, heads=8, kv_heads=8, head_dim=128,
                            vocab=1000)


def test_decode_step_is_bytes_over_effective_bandwidth_plus_fixed():
    ck = _single_part_checkpoint("W8A16-FP8")
    ctx = estimate(build(ck, explanation("W8A16-FP8"), rtx3090()))
    step = ctx.model.decode_step(1, 0, BF16_KV)
    wm = ctx.model.weights
    want_bytes = 0.0
    for p, b in wm.step_bytes(1).items():
        want_bytes += b / (936e9 * efficiency.BANDWIDTH_EFF[p.kernel_class][0])
    assert step.t_bytes == pytest.approx(want_bytes)
    gap = VLLM.overhead["graph_us_per_kernel"] * 1e-6
    gaps, host = 1 * 10 * gap, 300e-6
    # vLLM schedules the next step while the GPU runs this one: the host time overlaps the GPU's
    assert step.seconds == pytest.approx(max(max(step.t_bytes, step.t_compute) + gaps, host))
    assert step.t_host == host


def test_eager_mode_is_bounded_by_kernel_launches():
    ck = _single_part_checkpoint("W4A16-NVFP4", layers=4)
    ctx = build(ck, explanation(), rtx3090())
    eager = ctx.model.decode_step(1, 0, BF16_KV, graphs=False)
    launches = 4 * 10 * VLLM.overhead["eager_us_per_kernel"] * 1e-6
    gaps = 4 * 10 * VLLM.overhead["graph_us_per_kernel"] * 1e-6     # device-side gaps exist in eager mode too
    assert launches > max(eager.t_bytes, eager.t_compute) + gaps   # launch-bound: the launches are the time
    assert eager.seconds == pytest.approx(max(max(eager.t_bytes, eager.t_compute) + gaps, launches) + 300e-6)


@pytest.mark.parametrize("layers", [1, 4, 64])
@pytest.mark.parametrize("batch", [1, 16, 256])
def test_cuda_graphs_are_never_predicted_slower_than_eager(layers, batch):
    """Graphs remove CPU launch cost; they do not add GPU time. (A model that charged graph gaps but
    hid eager gaps behind GPU time predicted FastLLM's eager mode faster than vLLM with graphs.)"""
    ck = _single_part_checkpoint("W4A16-NVFP4", layers=layers)
    ctx = build(ck, explanation(), rtx3090())
    g = ctx.model.decode_step(batch, 1024, BF16_KV, graphs=True)
    e = ctx.model.decode_step(batch, 1024, BF16_KV, graphs=False)
    assert g.seconds <= e.seconds


def test_dequant_issue_term_counts_instructions_per_element_and_m_tiles():
    ck = _single_part_checkpoint("W8A16-FP8")
    ctx = build(ck, explanation("W8A16-FP8"), rtx3090())
    part = next(p for p in ctx.model.weights.parts if p.kernel_class == "w8a16_fp8")
    issue = 82 * 4 * 1695e6
    ipe, hidden = DEQUANT_INSTR["w8a16_fp8"][0], DEQUANT_OVERLAP[0]
    got = ctx.model._dequant_seconds(part, 1e9, 8192)
    assert got == pytest.approx(1e9 * ipe * (8192 / 64) / 32 / issue * (1 - hidden))
    assert ctx.model._dequant_seconds(part, 1e9, 1) == pytest.approx(1e9 * ipe / 32 / issue * (1 - hidden))


def test_prefill_compute_is_linear_flops_at_the_path_mma_plus_quadratic_attention():
    ck = dense_checkpoint("BF16", layers=2, hidden=1024, inter=2048, heads=8, kv_heads=8, head_dim=128, vocab=1000)
    ctx = estimate(build(ck, explanation("BF16"), rtx3090()))
    p = 4096
    pf = ctx.model.prefill(p, p, BF16_KV)
    rate = 71e12 * CE
    linear = sum(v * (1 if part.kind == "lm_head" else p) for part, v in ctx.model.weights.flops_per_token().items())
    attn = 2 * 8 * (128 + 128) * 2 * (p * (p + 1) / 2)
    assert pf.t_compute == pytest.approx((linear + attn) / rate)
    assert pf.t_dequant == 0
    # attention is quadratic: doubling the prompt more than doubles prefill time once attention matters
    long = ctx.model.prefill(8 * p, 8 * p, BF16_KV)
    assert long.seconds > 8 * pf.seconds


def test_turing_weight_only_path_uses_the_fp16_fp32acc_rate():
    ex = explanation("W4A16-NVFP4", gpu="rtx-2080-ti", mma="hmma_f16", kv_mma="hmma_f16")
    ctx = build(dense_checkpoint(), ex, rtx2080ti())
    assert ctx.model.eff.mma_tflops["hmma_f16"] == pytest.approx(53.8 * CE)
    peak, key = gpu_efficiency.peak_for_mma(rtx2080ti(), "hmma_bf16")
    assert key == "fp16_fp32acc" and peak == 53.8


def test_fp8_native_path_uses_the_fp8_rate():
    ex = explanation("W8A8-FP8", gpu="h100-sxm", mma="wgmma_e4m3", kv_mma="wgmma_bf16")
    ctx = build(dense_checkpoint("W8A8-FP8"), ex, h100())
    assert ctx.model.eff.mma_tflops["wgmma_e4m3"] == pytest.approx(1978.9 * CE)


def test_decode_pads_batch_to_the_mma_rows():
    ctx = estimate(build(dense_checkpoint("BF16"), explanation("BF16"), rtx3090()))
    one = ctx.model.decode_step(1, 0, BF16_KV)
    sixteen = ctx.model.decode_step(16, 0, BF16_KV)
    # compute of linear layers is the same for 1 and 16 rows (m16 instruction)
    assert sixteen.flops - one.flops == pytest.approx(0, abs=one.flops * 1e-9)


def test_crossover_batch_is_where_compute_reaches_bytes():
    ctx = build(dense_checkpoint("BF16"), explanation("BF16"), rtx3090())
    b = ctx.model.crossover_batch(0, BF16_KV)
    assert b is not None and b > 1
    below, at = ctx.model.decode_step(b - 1, 0, BF16_KV), ctx.model.decode_step(b, 0, BF16_KV)
    assert below.t_compute < below.t_bytes and at.t_compute >= at.t_bytes


# ---------------------------------------------------------------- TP and interconnect
def test_ring_allreduce_time():
    link = interconnect.link_for(rtx3090(), pcie_gen=4, pcie_lanes=16)
    gbs = 1.969 * 16 * 0.8
    got = link.allreduce(1e6, 2).value
    assert got == pytest.approx(25e-6 + 2 * 1 / 2 * 1e6 / (gbs * 1e9))
    assert link.allreduce(1e6, 1).value == 0


def test_datacenter_nvlink_is_used_for_tp():
    link = interconnect.link_for(h100())
    assert link.kind == "nvlink" and link.gbs == pytest.approx(450 * 0.8)


def test_tp_adds_allreduce_per_layer_to_the_step():
    ck = dense_checkpoint("W4A16-NVFP4")
    ctx = estimate(build(ck, explanation(), rtx3090(), gpus=2))
    one = ctx.model.decode_step(1, 0, BF16_KV, tp=1)
    two = ctx.model.decode_step(1, 0, BF16_KV, tp=2)
    ar = ctx.model.link.allreduce(1 * 4096 * 2, 2).value
    assert two.t_fixed - one.t_fixed == pytest.approx(32 * 2 * ar)
    assert two.t_bytes == pytest.approx(one.t_bytes / 2, rel=1e-6)


# ---------------------------------------------------------------- power, calibration
def test_power_limit_scales_compute_by_cube_root():
    ck = dense_checkpoint("BF16")
    full = build(ck, explanation("BF16"), rtx3090())
    capped = build(ck, explanation("BF16"), rtx3090(), power_limit_w=280.0)
    assert capped.model.clock_factor == pytest.approx((280 / 350) ** (1 / 3))
    f = full.model.prefill(4096, 4096, BF16_KV)
    c = capped.model.prefill(4096, 4096, BF16_KV)
    assert c.t_compute == pytest.approx(f.t_compute / capped.model.clock_factor)
    assert any("power limit" in w for w in capped.warnings)
    # bandwidth-bound decode does not lose the bytes term
    full_bytes = full.model.decode_step(1, 0, BF16_KV).t_bytes
    assert capped.model.decode_step(1, 0, BF16_KV).t_bytes == pytest.approx(full_bytes)


# ---------------------------------------------------------------- speculative
def test_expected_tokens_from_per_position_acceptance():
    assert speculative.expected_tokens((0.8, 0.5)) == pytest.approx(1 + 0.8 + 0.4)
    assert speculative.expected_tokens(()) == 1.0


def test_measured_acceptance_is_extended_at_the_method_decay():
    m = speculative.METHODS["eagle"]
    assert speculative.curve(m, (0.8, 0.6), 4) == pytest.approx((0.8, 0.6, 0.6 * m.decay, 0.6 * m.decay ** 2))
    assert speculative.curve(m, (), 2) == m.acceptance(2)


def test_speedup_formula_and_choice():
    m = speculative.METHODS["mtp"]
    pt = speculative.evaluate(m, 2, (0.8, 0.5), t_base=0.01, t_verify=0.011, t_draft_pass=0.001)
    assert pt.speedup == pytest.approx(2.2 * 0.01 / (0.011 + 2 * 0.001))
    pts = [speculative.evaluate(m, k, (0.9,) * k, 0.01, 0.01 + 0.004 * k, 0.0) for k in range(1, 6)]
    k = speculative.choose(pts)
    assert pts[k - 1].speedup >= max(p.speedup for p in pts) * 0.99
    bad = [speculative.evaluate(m, 1, (0.1,), 0.01, 0.02, 0.0)]
    assert speculative.choose(bad) == 0


def test_mtp_checkpoint_drafts_with_its_head():
    ck = dense_checkpoint(mtp_layers=1)
    ctx = build(ck, explanation(), rtx3090())
    assert ctx.spec_method.name == "mtp"
    s = context.Settings(BF16_KV, 1, 0.92, 2048, 1, 0, True)
    d = spec_concurrency.draft_pass(ctx, s, 1, 1)          # one token for one sequence
    head = next(m for m in ck.modules if m.role == "lm_head").stored_bytes
    mtp = next(m for m in ck.modules if m.role == "mtp").stored_bytes
    assert d.inputs["draft_bytes"] == pytest.approx(head + mtp)


def test_bad_overrides_are_bad_input():
    from advisor.errors import BadInput
    with pytest.raises(BadInput):
        build(dense_checkpoint(), explanation(), rtx3090(), vram_gb=-1.0)
    with pytest.raises(BadInput):
        build(dense_checkpoint(), explanation(), rtx3090(), spec_method="telepathy")
    with pytest.raises(BadInput):
        build(dense_checkpoint(), explanation(), rtx3090(), acceptance=(1.5,))
