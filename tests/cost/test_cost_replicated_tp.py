"""Module groups every tensor-parallel rank holds whole (ReplicatedLinear) under TP: the MoE router gate
(vLLM GateLinear(ReplicatedLinear), fused_moe/router/gate_linear.py:22@0.33.0; SGLang ReplicatedLinear,
models/qwen3_moe.py:290@0.5.23), LatentMoE's fc1/fc2_latent_proj when explain picks their kernels
(models/nemotron_h.py:197-213@0.33.0, 326-339@0.5.23), and replicated groups of the MTP head while it
drafts. The old code split the router's bytes, FLOPs and VRAM across the GPUs, gave explain the latent
projections' split shape and split every drafting MTP group."""

from __future__ import annotations

from dataclasses import replace

import pytest

from advisor.checkpoint.inspect import inspect_checkpoint
from advisor.cost import context, measured_kernels, weights
from advisor.cost.engine_profile import load_engine_memory
from advisor.cost.overrides import Overrides
from advisor.gpu_table import get_gpu
from advisor.kernel_path.explain import explain, tp_shape
from tests.conftest import ROOT

SUPER = ROOT / "benchmarks" / "validation_configs" / "nemotron-3-super-120b-a12b-bf16"


def _ctx(source: str, gpu: str, gpus: int, engine: str = "vllm"):
    ck = inspect_checkpoint(source)
    g = get_gpu(gpu)
    return context.build(ck, explain(ck, g, gpus=gpus, engine=engine), g, gpus=gpus,
                         engine=load_engine_memory(engine), overrides=Overrides(tp=gpus))


@pytest.mark.parametrize("source", ["demo:qwen3-30b-a3b-fp8", str(SUPER)])
def test_router_gate_is_whole_on_every_gpu(source):
    ctx = _ctx(source, "h100-sxm", 2)
    wm = ctx.model.weights
    routers = [p for p in wm.parts if p.role == "router"]
    assert routers and all(p.replicated and p.ranks(2) == 1 for p in routers)
    per_gpu = wm.step_bytes(1, tp=2)
    flops = wm.flops_per_token(tp=2)
    for p in routers:
        assert per_gpu[p] == pytest.approx(p.stored_bytes)
        assert flops[p] == pytest.approx(2.0 * p.params)
        if p.shape is not None:
            assert measured_kernels.gemm_shape(wm, p, 2)[:2] == p.shape
    whole = sum(p.stored_bytes for p in wm.parts if p.replicated)
    assert whole >= sum(p.stored_bytes for p in routers)
    assert wm.resident_bytes(2) == pytest.approx((sum(p.stored_bytes for p in wm.parts) - whole) / 2 + whole)
    step = ctx.model.decode_step(1, 1024, ctx.default_kv, tp=2)
    for c in step.parts:
        if c.part.role == "router":
            assert c.weight_bytes == pytest.approx(c.part.stored_bytes)


def test_latent_projections_keep_their_whole_shape_in_explain():
    ck = inspect_checkpoint(str(SUPER))
    latent = [m for m in ck.modules if m.name.endswith(("fc1_latent_proj", "fc2_latent_proj"))]
    assert len(latent) >= 2                      # the decoder's, and the MTP head's
    for m in latent:
        assert m.shape is not None and tp_shape(m, 4) == m.shape
    # a column-parallel group beside them still splits N
    other = next(m for m in ck.modules if m.role == "mlp_up" or m.role == "attn_qkv")
    assert other.shape is not None and tp_shape(other, 4) != other.shape


def test_drafting_mtp_group_that_is_replicated_is_read_whole():
    ctx = _ctx(str(SUPER), "h200-sxm", 4, engine="sglang")
    wm = ctx.model.weights
    latent = next(p for p in wm.parts if p.name.endswith("fc1_latent_proj") and p.kind == "dense")
    mtp = replace(latent, kind="mtp", name="mtp.layers.0.mixer.fc1_latent_proj")
    split = replace(latent, kind="mtp", name="mtp.layers.0.mixer.shared_experts.up_proj", role="mlp_up")
    step = ctx.model.decode_step(4, 1024, ctx.default_kv, tp=4, extra=(mtp, split))
    got = {c.part.name: c for c in step.parts}
    assert got[mtp.name].weight_bytes == pytest.approx(mtp.stored_bytes)
    assert got[split.name].weight_bytes == pytest.approx(split.stored_bytes / 4)
    assert weights.REPLICATED_ROLES == ("router",)
