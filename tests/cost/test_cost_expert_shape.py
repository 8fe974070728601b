"""The measured MoE layer is charged the experts the checkpoint stores (issue 17, a validation finding):
their width (Nemotron-3 Super's LatentMoE experts run in the 1024-wide latent space, behind
fc1_latent_proj) and their matrix count (Nemotron-H's ReLU^2 experts: up and down, 2 matrices; gated
models: 3), not the config's hidden size and the measured kernel's gating. The latent projections are
dense GEMMs every tensor-parallel rank holds whole (ReplicatedLinear)."""

from __future__ import annotations

import pytest

from advisor.checkpoint.inspect import inspect_checkpoint
from advisor.cost import context, measured, measured_kernels
from advisor.cost.engine_profile import load_engine_memory
from advisor.cost.overrides import Overrides
from advisor.gpu_table import get_gpu
from advisor.kernel_path.explain import explain
from tests.conftest import ROOT

CONFIGS = ROOT / "benchmarks" / "validation_configs"
SUPER = "nemotron-3-super-120b-a12b-bf16"
NANO = "nemotron-3-nano-30b-a3b-bf16"


def _ctx(config, gpu, engine="sglang", gpus=1):
    ck = inspect_checkpoint(str(CONFIGS / config))
    g = get_gpu(gpu)
    ex = explain(ck, g, gpus=gpus, engine=engine)
    return context.build(ck, ex, g, gpus=gpus, engine=load_engine_memory(engine), overrides=Overrides(tp=gpus))


def _charged_expert_bytes(ctx, batch, tp):
    """Weight bytes per GPU per step the measured MoE parts are charged: their roofline memory term
    (t_bytes x e, at the evidence's bandwidth) less the activations it holds."""
    step = ctx.model.decode_step(batch, 1024, ctx.default_kv, tp=tp)
    ops = ctx.model.ops
    bw = ops.evidence.bandwidth_gbs() * 1e9 / ops.bandwidth_scale
    experts = [c for c in step.parts if c.part.kind == "expert"]
    assert experts and all("measured MoE layer" in c.bandwidth_eff[1] for c in experts)
    charged = sum(c.t_bytes * c.bandwidth_eff[0] * bw for c in experts)
    shape = measured_kernels.expert_shape(ctx.checkpoint.arch, ctx.model.weights, ctx.model.moe_layers())
    activations = batch * shape.width * 4 * ctx.model.moe_layers()
    return charged - activations, experts


@pytest.mark.parametrize("config, gpu, tp, batch", [(NANO, "b200", 1, 256), (SUPER, "h200-sxm", 4, 256),
                                                   ("qwen3-30b-a3b", "h200-sxm", 1, 256)])
def test_measured_moe_charges_the_expert_bytes_the_gpu_holds(config, gpu, tp, batch):
    """Every expert is touched at this batch: the MoE layer reads each GPU's share of the stored experts once.
    The old model charged Nano 1.5x (3 matrices for 2) and Super 6x (3 for 2, at the 4096 hidden size for
    the 1024 latent width)."""
    ctx = _ctx(config, gpu, gpus=tp)
    moe = ctx.checkpoint.arch.moe
    assert min(moe.num_experts, batch * moe.top_k) == moe.num_experts
    charged, _ = _charged_expert_bytes(ctx, batch, tp)
    held = ctx.model.weights.bytes_of("expert") / tp
    assert charged == pytest.approx(held, rel=0.01)


def test_non_gated_experts_are_two_matrices_gated_three():
    """The matrix count comes from the checkpoint's expert groups, whatever they are called."""
    got = {}
    for config in (NANO, SUPER, "qwen3-30b-a3b", "gpt-oss-120b", "minimax-m2.5-fp8"):
        ck = inspect_checkpoint(str(CONFIGS / config))
        ctx = _ctx(config, "b200")
        got[config] = measured_kernels.expert_shape(ck.arch, ctx.model.weights, ctx.model.moe_layers())
    assert got[NANO].mats == got[SUPER].mats == 2
    # gate/up/down (Qwen3), a fused gate_up and down (gpt-oss), w1/w2/w3 (MiniMax, Mixtral-like)
    assert got["qwen3-30b-a3b"].mats == got["gpt-oss-120b"].mats == got["minimax-m2.5-fp8"].mats == 3
    assert "non-gated" in got[NANO].source and "(gated)" in got["qwen3-30b-a3b"].source


def test_latent_moe_experts_run_at_the_latent_width():
    ctx = _ctx(SUPER, "h200-sxm", gpus=4)
    arch = ctx.checkpoint.arch
    shape = measured_kernels.expert_shape(arch, ctx.model.weights, ctx.model.moe_layers())
    latent = next(m.shape[0] for m in ctx.checkpoint.modules if m.name.endswith("mixer.fc1_latent_proj"))
    assert (shape.width, shape.inter) == (latent, arch.moe.expert_intermediate_size) and latent < arch.hidden_size
    nano = _ctx(NANO, "b200")
    assert measured_kernels.expert_shape(nano.checkpoint.arch, nano.model.weights).width == \
        nano.checkpoint.arch.hidden_size
    _, experts = _charged_expert_bytes(ctx, 64, 4)
    # SGLang's H200 BF16 MoE table at Nemotron-H's shapes was measured non-gated: its own 2-matrix rows, no stand-in
    assert all("width 1024 (latent" in c.measured and "2 matrices per expert (non-gated)" in c.measured
               and "non-gated rows" in c.measured and "-matrix roofline" not in c.measured for c in experts)


def test_a_gated_table_stands_in_for_a_non_gated_model_by_its_efficiency():
    """The same measured kernel at the same token count: 2 matrices move and multiply 2/3 of 3 matrices' work
    at the table's e(T); the fixed (routing, permute) cost is the table's."""
    h200 = get_gpu("h200-sxm")
    shape = dict(tokens=256, hidden=1024, inter=2688, topk=22, experts=512, engine="sglang", tp=4,
                 kernel="fused_moe_triton")               # measured gated only (its non-gated rows: gating unknown)
    three = measured.moe_layer_time(h200, "bf16", mats=3, **shape)
    two = measured.moe_layer_time(h200, "bf16", mats=2, **shape)
    default = measured.moe_layer_time(h200, "bf16", **shape)
    assert three.source == two.source and three.fixed_s == two.fixed_s
    assert default.seconds == three.seconds                 # the gated kernel's own count when none is given
    act = 256 * 1024 * 4 / (h200.bandwidth_gbs * 1e9)
    assert (two.memory_s - act) == pytest.approx((three.memory_s - act) * 2 / 3, rel=1e-9)
    assert two.compute_s == pytest.approx(three.compute_s * 2 / 3, rel=1e-9)
    assert "3 matrices" in two.note and "matrices" not in three.note


def test_latent_projections_are_replicated_measured_gemms():
    """fc1/fc2_latent_proj are ReplicatedLinear in vLLM and SGLang: each rank reads and holds them whole."""
    ctx = _ctx(SUPER, "h200-sxm", gpus=4)
    wm = ctx.model.weights
    step = ctx.model.decode_step(8, 1024, ctx.default_kv, tp=4)
    latent = [c for c in step.parts if c.part.name.endswith("latent_proj") and c.part.kind == "dense"]
    assert len(latent) == 2
    for c in latent:
        assert c.weight_bytes == c.part.stored_bytes                  # not a quarter
        assert "gemm" in c.measured and c.calls > 0                   # a measured GEMM with its call floor
        assert measured_kernels.gemm_shape(wm, c.part, 4)[:2] == c.part.shape
    whole = sum(p.stored_bytes for p in wm.parts if p.replicated)
    assert whole > 0
    assert wm.resident_bytes(4) == pytest.approx((sum(p.stored_bytes for p in wm.parts) - whole) / 4 + whole)
