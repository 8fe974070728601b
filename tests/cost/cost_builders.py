"""Builders of GPUs, checkpoints and explanations for the cost tests (importable: unique name)."""


from __future__ import annotations

from advisor.checkpoint.model import (ActQuant, ArchInfo, CheckpointInfo, MLAInfo, MoEInfo, ModuleGroup, Totals,
                                      WeightQuant)
from advisor.gpu_spec import NOT_SUPPORTED, GpuSpec
from advisor.kernel_path.model import Explanation, LayerDecision

NS = NOT_SUPPORTED


def make_gpu(id="rtx-3090", **kw) -> GpuSpec:
    base = dict(
        id=id, name="GeForce RTX 3090", arch="ampere", cc=(8, 6), sm_count=82, boost_clock_mhz=1695.0,
        memory_gb=24.0, memory_type="GDDR6X", bandwidth_gbs=936.0, l2_mb=6.0, tdp_w=350.0, nvlink_gbs=112.5,
        peaks={"fp16_fp32acc": 71.0, "fp16_fp16acc": 142.0, "bf16": 71.0, "tf32": 35.6, "fp8_fp32acc": NS,
               "fp8_fp16acc": NS, "fp6": NS, "fp4": NS, "int8": 284.0, "int4": 568.0},
        segment="consumer", pcie_gen=4, pcie_lanes=16)
    base.update(kw)
    return GpuSpec(**base)


def rtx3090() -> GpuSpec:
    return make_gpu()


def rtx2080ti() -> GpuSpec:
    return make_gpu("rtx-2080-ti", name="GeForce RTX 2080 Ti", arch="turing", cc=(7, 5), sm_count=68,
                    boost_clock_mhz=1545.0, memory_gb=11.0, bandwidth_gbs=616.0, tdp_w=250.0, nvlink_gbs=100.0,
                    peaks={"fp16_fp32acc": 53.8, "fp16_fp16acc": 107.6, "bf16": NS, "tf32": NS,
                           "fp8_fp32acc": NS, "fp8_fp16acc": NS, "fp6": NS, "fp4": NS,
                           "int8": 215.2, "int4": 430.3}, pcie_gen=3)


def h100() -> GpuSpec:
    return make_gpu("h100-sxm", name="H100 SXM5 80GB", arch="hopper", cc=(9, 0), sm_count=132,
                    boost_clock_mhz=1980.0, memory_gb=80.0, bandwidth_gbs=3350.0, tdp_w=700.0, nvlink_gbs=900.0,
                    peaks={"fp16_fp32acc": 989.4, "fp16_fp16acc": 989.4, "bf16": 989.4, "tf32": 494.7,
                           "fp8_fp32acc": 1978.9, "fp8_fp16acc": 1978.9, "fp6": NS, "fp4": NS,
                           "int8": 1978.9, "int4": NS}, segment="datacenter", pcie_gen=5)


# ---------------------------------------------------------------- checkpoints
BYTES_PER_PARAM = {  # stored width incl. scales (per-element)
    "BF16": 2.0, "FP16": 2.0,
    "W4A16-NVFP4": 0.5 + 1 / 16, "W4A4-NVFP4": 0.5 + 1 / 16,      # E2M1 + one E4M3 per 16
    "W8A16-FP8": 1.0, "W8A8-FP8": 1.0,
    "W4A16-INT4": 0.5 + 2 / 128,                                   # group 128 fp16 scale
}


def _mod(name, role, scheme, shape, count, layers=()):
    params = shape[0] * shape[1] * count
    wfmt = {"BF16": "bf16", "FP16": "fp16"}.get(scheme, scheme.split("-")[-1].lower())
    return ModuleGroup(name=name, role=role, scheme=scheme, weight=WeightQuant(format=wfmt),
                       act=ActQuant(), count=count, params=params,
                       stored_bytes=int(params * BYTES_PER_PARAM[scheme]), shape=shape, layers=tuple(layers))


def dense_checkpoint(scheme="W4A16-NVFP4", *, layers=32, hidden=4096, inter=14336, heads=32, kv_heads=8,
                     head_dim=128, vocab=128256, max_pos=131072, linear_layers=0, mtp_layers=0,
                     kv_layers=None) -> CheckpointInfo:
    q = heads * head_dim + 2 * kv_heads * head_dim
    mods = [
        _mod("layers.*.self_attn.qkv_proj", "attn_qkv", scheme, (q, hidden), layers),
        _mod("layers.*.self_attn.o_proj", "attn_o", scheme, (hidden, heads * head_dim), layers),
        _mod("layers.*.mlp.gate_up_proj", "mlp_gate_up", scheme, (2 * inter, hidden), layers),
        _mod("layers.*.mlp.down_proj", "mlp_down", scheme, (hidden, inter), layers),
        _mod("embed_tokens", "embed", "BF16", (vocab, hidden), 1),
        _mod("lm_head", "lm_head", "BF16", (vocab, hidden), 1),
    ]
    if mtp_layers:
        mods.append(_mod("mtp.layers.*", "mtp", "BF16", (hidden, 3 * hidden), mtp_layers * 4))
    arch = ArchInfo(model_type="llama", num_layers=layers, hidden_size=hidden, intermediate_size=inter,
                    num_attention_heads=heads, num_kv_heads=kv_heads, head_dim=head_dim, vocab_size=vocab,
                    max_position_embeddings=max_pos,
                    kv_layers=layers - linear_layers if kv_layers is None else kv_layers,
                    linear_attention_layers=linear_layers, mtp_layers=mtp_layers)
    total = sum(m.stored_bytes for m in mods)
    return CheckpointInfo(source=f"test/{scheme}", producer="modelopt", label=scheme, scheme_shares={scheme: 1.0},
                          modules=tuple(mods), arch=arch,
                          totals=Totals(params=sum(m.params for m in mods), stored_bytes=total))


def moe_checkpoint(scheme="W4A16-NVFP4", *, experts=128, top_k=8, layers=48, hidden=2048, moe_inter=768,
                   shared=0, mla=False) -> CheckpointInfo:
    heads, kv_heads, head_dim, vocab = 32, 4, 128, 151936
    q = heads * head_dim + 2 * kv_heads * head_dim
    mods = [
        _mod("layers.*.self_attn.qkv_proj", "attn_qkv", scheme, (q, hidden), layers),
        _mod("layers.*.self_attn.o_proj", "attn_o", scheme, (hidden, heads * head_dim), layers),
        _mod("layers.*.mlp.experts.*.gate_up_proj", "expert", scheme, (2 * moe_inter, hidden), layers * experts),
        _mod("layers.*.mlp.experts.*.down_proj", "expert", scheme, (hidden, moe_inter), layers * experts),
        _mod("layers.*.mlp.gate", "router", "BF16", (experts, hidden), layers),
        _mod("embed_tokens", "embed", "BF16", (vocab, hidden), 1),
        _mod("lm_head", "lm_head", "BF16", (vocab, hidden), 1),
    ]
    if shared:
        mods.append(_mod("layers.*.mlp.shared_expert", "shared_expert", scheme, (3 * moe_inter, hidden), layers))
    arch = ArchInfo(model_type="qwen3_moe", num_layers=layers, hidden_size=hidden, intermediate_size=None,
                    num_attention_heads=heads, num_kv_heads=kv_heads, head_dim=head_dim, vocab_size=vocab,
                    max_position_embeddings=262144, kv_layers=layers,
                    moe=MoEInfo(num_experts=experts, top_k=top_k, num_shared_experts=1 if shared else 0,
                                expert_intermediate_size=moe_inter),
                    mla=MLAInfo(kv_lora_rank=512, qk_rope_head_dim=64, qk_nope_head_dim=128, v_head_dim=128)
                    if mla else None)
    return CheckpointInfo(source=f"test/moe-{scheme}", producer="modelopt", label=scheme,
                          scheme_shares={scheme: 1.0}, modules=tuple(mods), arch=arch,
                          totals=Totals(params=sum(m.params for m in mods),
                                        stored_bytes=sum(m.stored_bytes for m in mods)))


# ---------------------------------------------------------------- explanations
WEIGHT_ONLY_MMA = {"ampere": "hmma_bf16", "turing": "hmma_f16", "hopper": "hmma_bf16", "ada": "hmma_bf16"}


def decision(layer_class, scheme, *, mma="hmma_bf16", dequant="registers", roles=(), kv=None, runs=True,
             error=None, effective=None) -> LayerDecision:
    return LayerDecision(layer_class=layer_class, roles=roles, checkpoint_scheme=scheme,
                         effective_scheme=effective or scheme,
                         kernel="MarlinLinearKernel" if dequant == "registers" else "x",
                         mma=mma, activation_dtype="bf16", dequant=dequant, runs=runs, reasons=("test",),
                         kv_cache_dtype=kv, error=error)


def explanation(scheme="W4A16-NVFP4", *, gpu="rtx-3090", engine="vllm", mma="hmma_bf16", kv="auto",
                kv_mma="hmma_bf16", dequant=None, kv_runs=True) -> Explanation:
    wo = scheme.startswith(("W4A16", "W8A16"))
    dq = dequant or ("registers" if wo else "none")
    decisions = (
        decision("dense_linear", scheme, mma=mma, dequant=dq,
                 roles=("attn_qkv", "attn_o", "mlp_gate_up", "mlp_down", "shared_expert")),
        decision("moe_experts", scheme, mma=mma, dequant=dq, roles=("expert",)),
        decision("attention_kv", "KV bf16", mma=kv_mma, dequant="none", roles=("attention",), kv=kv,
                 effective=f"KV {kv}", runs=kv_runs, error=None if kv_runs else "rejected"),
    )
    return Explanation(engine=engine, engine_version="0.33.0", requested_version=None, version_note=None,
                       gpu_id=gpu, gpus=1, checkpoint_label=scheme, decisions=decisions, summary="test", runs=True)




def vllm_plan(gpu: GpuSpec, scheme: str = "W4A16-NVFP4", ck: CheckpointInfo | None = None, **ov):
    """make_plan for a dense checkpoint on one GPU with vLLM's memory profile and the interactive workload;
    ``ov``: Overrides fields."""
    from advisor.cost.engine_profile import load_engine_memory
    from advisor.cost.overrides import Overrides
    from advisor.cost.plan import make_plan
    from advisor.cost.workload import get_workload

    ck = ck or dense_checkpoint(scheme)
    mma = "hmma_f16" if gpu.arch == "turing" else "hmma_bf16"
    return make_plan(ck, explanation(scheme, gpu=gpu.id, mma=mma, kv_mma=mma), gpu, gpus=1,
                     workload=get_workload("interactive"), overrides=Overrides(**ov),
                     engine_memory=load_engine_memory("vllm"))
