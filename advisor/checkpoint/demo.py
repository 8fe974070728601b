"""Bundled config-only demo checkpoints (profiles/demo/NAME/), used when no checkpoint is given.

``inspect demo:NAME`` resolves here. Each folder holds config.json (+ hf_quant_config.json for
ModelOpt) modeled on a real public checkpoint; profiles/demo/README.md says which.
"""

from __future__ import annotations

from pathlib import Path

from advisor.errors import BadInput

# name -> (one-line description, expected checkpoint label)
DEMOS: dict[str, tuple[str, str]] = {
    "qwen3-8b-nvfp4": ("dense Qwen3-8B, ModelOpt NVFP4 W4A4 + FP8 KV cache", "W4A4-NVFP4"),
    "qwen3.6-27b-nvfp4-mixed": ("hybrid GDN Qwen3.6-27B (nvidia), ModelOpt mixed FP8 + W4A16 NVFP4", "MIXED"),
    "qwen3-30b-a3b-nvfp4": ("MoE Qwen3-30B-A3B, ModelOpt NVFP4 W4A4 + FP8 KV cache", "W4A4-NVFP4"),
    "qwen3-30b-a3b-fp8": ("MoE Qwen3-30B-A3B-FP8, block FP8 128x128, dynamic activations", "W8A8-FP8"),
    "llama-3.1-8b-gptq-int4": ("dense Llama-3.1-8B, GPTQ INT4 group 128", "W4A16-INT4"),
    "gpt-oss-20b-mxfp4": ("MoE gpt-oss-20b (openai), MXFP4 experts, BF16 attention with sinks", "W4A16-MXFP4"),
}


def demo_root() -> Path:
    from profiles import PROFILES_DIR

    return PROFILES_DIR / "demo"


def list_demos() -> list[str]:
    return [n for n in DEMOS if (demo_root() / n / "config.json").is_file()]


def demo_path(name: str) -> Path:
    if name not in DEMOS:
        raise BadInput(f"unknown demo checkpoint {name!r} (available: {', '.join(DEMOS)})", path=f"demo:{name}")
    return demo_root() / name
