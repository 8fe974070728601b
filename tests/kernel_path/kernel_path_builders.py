"""Builders for the kernel-path tests: GPUs and checkpoints as frozen records, built directly.

Imported by the test modules (not a conftest: plain functions are enough)."""

from __future__ import annotations

from advisor.checkpoint.model import (
    ActQuant, ArchInfo, CheckpointInfo, MLAInfo, MoEInfo, ModuleGroup, Totals, WeightQuant,
)
from advisor.gpu_spec import GpuSpec

# (id, name, arch, cc) — one representative per architecture the rules distinguish.
GPUS = {
    "v100": ("Tesla V100", "volta", (7, 0)),
    "t4": ("Tesla T4", "turing", (7, 5)),
    "a100": ("A100", "ampere", (8, 0)),
    "rtx-3090": ("GeForce RTX 3090", "ampere", (8, 6)),
    "rtx-4090": ("GeForce RTX 4090", "ada", (8, 9)),
    "l40s": ("L40S", "ada", (8, 9)),
    "h100": ("H100 SXM", "hopper", (9, 0)),
    "b200": ("B200", "blackwell", (10, 0)),
    "b300": ("B300", "blackwell", (10, 3)),
    "thor": ("Jetson Thor", "blackwell", (11, 0)),
    "rtx-5090": ("GeForce RTX 5090", "blackwell", (12, 0)),
    "gb10": ("GB10", "blackwell", (12, 1)),
}


def gpu(gid: str) -> GpuSpec:
    name, arch, cc = GPUS[gid]
    return GpuSpec(id=gid, name=name, arch=arch, cc=cc, sm_count=None, boost_clock_mhz=None,
                   memory_gb=24.0, memory_type=None, bandwidth_gbs=None, l2_mb=None, tdp_w=None,
                   nvlink_gbs=None)


# Scheme presets: (scheme, producer, WeightQuant, ActQuant)
def _w(fmt, bits, gran, group=None, block=None, sym=True):
    return WeightQuant(format=fmt, bits=bits, granularity=gran, group_size=group, block=block, symmetric=sym)


PRESETS = {
    "nvfp4-w4a4": ("W4A4-NVFP4", "modelopt", _w("nvfp4", 4, "nvfp4", 16), ActQuant("nvfp4", True, "group", 16)),
    "nvfp4-w4a4-ct": ("W4A4-NVFP4", "compressed-tensors", _w("nvfp4", 4, "nvfp4", 16),
                      ActQuant("nvfp4", True, "group", 16)),
    "nvfp4-a16": ("W4A16-NVFP4", "modelopt", _w("nvfp4", 4, "nvfp4", 16), ActQuant()),
    "fp8-ct-dynamic": ("W8A8-FP8", "compressed-tensors", _w("fp8_e4m3", 8, "channel"),
                       ActQuant("fp8_e4m3", True, "token")),
    "fp8-ct-static": ("W8A8-FP8", "compressed-tensors", _w("fp8_e4m3", 8, "tensor"),
                      ActQuant("fp8_e4m3", False, "tensor")),
    "fp8-modelopt": ("W8A8-FP8", "modelopt", _w("fp8_e4m3", 8, "tensor"), ActQuant("fp8_e4m3", False, "tensor")),
    "fp8-dynamic": ("W8A8-FP8", "fp8", _w("fp8_e4m3", 8, "tensor"), ActQuant("fp8_e4m3", True, "token")),
    "fp8-block": ("W8A8-FP8", "fp8", _w("fp8_e4m3", 8, "block", block=(128, 128)),
                  ActQuant("fp8_e4m3", True, "group", 128)),
    "fp8-w8a16": ("W8A16-FP8", "compressed-tensors", _w("fp8_e4m3", 8, "channel"), ActQuant()),
    "int8-w8a8": ("W8A8-INT8", "compressed-tensors", _w("int8", 8, "channel"), ActQuant("int8", True, "token")),
    "gptq-int4": ("W4A16-INT4", "gptq", _w("int4", 4, "group", 128), ActQuant()),
    "gptq-int4-g32": ("W4A16-INT4", "gptq", _w("int4", 4, "group", 32), ActQuant()),
    "awq-int4": ("W4A16-INT4", "awq", _w("uint4", 4, "group", 128, sym=False), ActQuant()),
    "w4a8-fp8": ("W4A8-FP8", "compressed-tensors", _w("int4", 4, "group", 128), ActQuant("fp8_e4m3", True, "token")),
    "mxfp4-w4a4": ("W4A4-MXFP4", "compressed-tensors", _w("mxfp4", 4, "mxfp4", 32),
                   ActQuant("mxfp4", True, "group", 32)),
    "bf16": ("BF16", "none", WeightQuant(), ActQuant()),
}

DENSE_ROLES = ("attn_qkv", "attn_o", "mlp_gate_up", "mlp_down")


def checkpoint(preset: str = "nvfp4-w4a4", *, moe: bool = False, moe_preset: str | None = None,
               mla: bool = False, model_type: str = "llama", kv: str | None = None,
               head_dim: int = 128, shape: tuple[int, int] = (4096, 4096)) -> CheckpointInfo:
    scheme, producer, w, a = PRESETS[preset]
    modules = [ModuleGroup(name=f"layers.*.{r}", role=r, scheme=scheme, weight=w, act=a, count=32,
                           shape=shape) for r in DENSE_ROLES]
    moe_info = None
    if moe:
        ms, _, mw, ma = PRESETS[moe_preset or preset]
        modules.append(ModuleGroup(name="layers.*.mlp.experts.*", role="expert", scheme=ms, weight=mw,
                                   act=ma, count=32 * 64, shape=(1536, 4096)))
        moe_info = MoEInfo(num_experts=64, top_k=4)
    kept = (ModuleGroup(name="lm_head", role="lm_head", scheme="BF16", weight=WeightQuant(), act=ActQuant(),
                        shape=(32000, 4096)),
            ModuleGroup(name="embed_tokens", role="embed", scheme="BF16", weight=WeightQuant(), act=ActQuant(),
                        shape=(32000, 4096)))
    arch = ArchInfo(model_type=model_type, num_layers=32, hidden_size=4096, num_attention_heads=32,
                    num_kv_heads=8, head_dim=head_dim, vocab_size=32000, kv_layers=32, moe=moe_info,
                    mla=MLAInfo(kv_lora_rank=512, qk_rope_head_dim=64) if mla else None)
    label = scheme if preset != "bf16" else "BF16"
    return CheckpointInfo(source=f"test/{preset}", producer=producer, label=label,
                          scheme_shares={scheme: 1.0} if preset != "bf16" else {},
                          modules=tuple(modules), arch=arch, totals=Totals(), kv_cache_quant=kv,
                          kept_bf16=kept)

