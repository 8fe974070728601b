"""The plain-words notes the tuner attaches to its options."""

from __future__ import annotations

from advisor.cost import spec_concurrency
from advisor.cost.context import PlanContext, Settings
from advisor.cost.kv import KvDtype


def declared_kv_kind(ctx: PlanContext) -> str | None:
    """The KV quantization the checkpoint declares (calibrated scales shipped with it), as a KvDtype kind."""
    q = ctx.checkpoint.kv_cache_quant
    return {"fp8": "fp8", "nvfp4": "nvfp4", "int8": "int8"}.get(q or "")


def kv_note(kv: KvDtype, declared: str | None = None) -> str:
    if kv.kind in ("nvfp4", "fp4_mx", "int4"):
        note = "4-bit KV: the largest pool, unpacked to 16 bits on every read; lossy"
    elif kv.kind in ("fp8", "int8", "mxfp8"):
        note = "8-bit KV: twice the 16-bit pool; small accuracy cost"
    else:
        return "16-bit KV: exact, smallest pool"
    if kv.name.endswith("_per_token_head"):
        return note + " (scales computed per token and head at write time)"
    if declared == kv.kind:
        return note + " (the checkpoint ships calibrated KV scales for it)"
    if kv.kind == "fp8":
        # vLLM: FP8 KV scales come from the checkpoint or default to 1.0 (docs quantized_kvcache.md:24-37)
        return note + " (no KV scales in the checkpoint: uncalibrated, scale 1.0)"
    return note


def raised_share_note(ctx: PlanContext, s: Settings, default_share: float) -> str:
    """SGLang keeps activations and CUDA graphs outside --mem-fraction-static: say how much of its own
    reserve a raised share leaves (the activation peak is checked to fit; graphs get what remains)."""
    if ctx.engine.share_covers != "weights_kv":
        return ""
    left = ctx.vram_bytes * (1 - s.memory_share) / 2**30
    own = ctx.vram_bytes * (1 - default_share) / 2**30
    return (f"; leaves {left:.1f} GiB outside the share where {ctx.engine.engine}'s default keeps {own:.1f} GiB "
            "for activations and CUDA graphs: if graph capture runs out of memory, lower --cuda-graph-max-bs-decode")


def fixed_draft_note(ctx: PlanContext, s: Settings, batch: int, context: float) -> tuple[str, ...]:
    """--draft-tokens that lose against plain decoding at the workload's batch: say so and what pays."""
    method = ctx.spec_method
    step = spec_concurrency.spec_step(ctx, s, batch, s.draft_tokens, context)
    if method is None or step.speedup >= 1.0:
        return ()
    best = spec_concurrency.row(ctx, s, batch, context)
    better = f"{best.chosen_k} draft tokens pay {best.chosen.speedup:.2f}x" if best.chosen else \
        "no draft count pays here"
    return (f"--draft-tokens {s.draft_tokens} at {batch} stream(s): {method.name} runs at "
            f"{step.speedup:.2f}x plain decoding (the verify step scores {step.derived.inputs['M_verify']} rows); "
            f"{better}",)
