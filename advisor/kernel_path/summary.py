"""The plain-language paragraph at the top of an explanation, and words for MMA classes."""

from __future__ import annotations

from advisor.checkpoint.model import CheckpointInfo
from advisor.gpu_spec import GpuSpec
from advisor.kernel_path.model import Explanation, LayerDecision

MMA_WORDS = {
    "hmma_f16": "FP16 tensor cores (HMMA)",
    "hmma_bf16": "BF16 tensor cores (HMMA)",
    "imma_int8": "INT8 tensor cores (IMMA)",
    "imma_int4": "INT4 tensor cores (IMMA)",
    "qmma_e4m3": "FP8 tensor cores (QMMA e4m3)",
    "wgmma_bf16": "Hopper BF16 tensor cores (WGMMA)",
    "wgmma_e4m3": "Hopper FP8 tensor cores (WGMMA e4m3)",
    "wgmma_int8": "Hopper INT8 tensor cores (WGMMA)",
    "tcgen05_bf16": "Blackwell BF16 tensor cores (tcgen05)",
    "tcgen05_e4m3": "Blackwell FP8 tensor cores (tcgen05)",
    "tcgen05_fp4_block_scaled": "Blackwell block-scaled FP4 tensor cores (tcgen05)",
    "tcgen05_mxf8f6f4": "Blackwell block-scaled FP8/FP6/FP4 tensor cores (tcgen05)",
    "mma_sync_fp4_block_scaled": "block-scaled FP4 tensor cores (sm_12x mma.sync)",
    "none": "no tensor cores",
}
_ACT_WORDS = {"bf16": "BF16", "fp16": "FP16", "fp8_e4m3": "FP8", "nvfp4": "NVFP4", "mxfp4": "MXFP4",
              "mxfp8": "MXFP8", "int8": "INT8", "fp32": "FP32"}
_NATIVE_WORDS = {"nvfp4": "FP4", "mxfp4": "FP4", "fp8_e4m3": "FP8", "int8": "INT8"}
# Peak-table key of the tensor-core rate each activation format runs at (FP32 accumulation for FP8).
_CEILING_PEAK = {"fp8_e4m3": "fp8_fp32acc", "mxfp8": "fp8_fp32acc", "int8": "int8", "nvfp4": "fp4",
                 "mxfp4": "fp4"}


def scheme_words(scheme: str) -> str:
    """'W4A4-NVFP4' -> 'W4A4 NVFP4'."""
    return scheme.replace("-", " ")


def weight_format(scheme: str) -> str:
    return scheme.split("-", 1)[1] if "-" in scheme else scheme


def _bits_like(scheme: str) -> str:
    return "INT4" if scheme.startswith("W4") else "INT8" if scheme.startswith("W8") else "BF16"


def moved_bytes(d: LayerDecision, ck: CheckpointInfo) -> float:
    """Checkpoint bytes of the module groups a decision covers (0 when it names none)."""
    names = {c.name for c in d.modules}
    return float(sum(m.stored_bytes for m in ck.modules if m.name in names)) if names else 0.0


def _primary(exp: Explanation, ck: CheckpointInfo | None = None) -> LayerDecision | None:
    """The GEMM decision that moves the most weight bytes, quantized layers first. Decisions that name no
    modules (built by hand) are ranked by their scheme's byte share, experts before dense layers."""
    shares: dict[str, float] = {s: v for s, v in ck.scheme_shares.items()} if ck is not None else {}

    def weight(d: LayerDecision) -> tuple:
        return (moved_bytes(d, ck) if ck is not None else 0.0, shares.get(d.checkpoint_scheme, 0.0),
                d.layer_class == "moe_experts")

    gemm = [d for d in exp.decisions if d.layer_class in ("moe_experts", "dense_linear")]
    quantized = [d for d in gemm if d.checkpoint_scheme not in ("BF16", "FP16")]
    if quantized:
        return max(quantized, key=weight)
    return max(gemm, key=weight) if gemm else None


def _sentence_for(d: LayerDecision, gpu: GpuSpec, lead: bool, mixed: bool = False) -> str:
    ck, eff, act = d.checkpoint_scheme, d.effective_scheme, d.activation_dtype
    fmt = weight_format(ck if ck not in ("BF16", "FP16") else eff)
    mma = MMA_WORDS.get(d.mma, d.mma)
    actw = _ACT_WORDS.get(act, act.upper())
    head = (f"On your {gpu.name} this {scheme_words(ck)} checkpoint" if lead
            else f"The {_class_words(d)} ({scheme_words(ck)})")
    runs = "runs" if lead else "run"
    if lead and mixed:
        head, runs = f"On your {gpu.name} the {scheme_words(ck)} layers of this mixed checkpoint", "run"
    if d.dequant == "cpu" and lead:
        head, runs = f"On your {gpu.name} the {_class_words(d)} of this {scheme_words(ck)} checkpoint", "run"
    if d.dequant == "cpu":
        return (f"{head} {runs} on the CPU ({d.kernel}): the GPU sits idle for these layers and speed is set by "
                "CPU memory bandwidth and cores.")
    if ck in ("BF16", "FP16"):
        return f"{head} {runs} unquantized on {mma}; decode reads 2 bytes per weight."
    weight_only = act in ("bf16", "fp16", "fp32")
    asked_for_quant_acts = "A16" not in ck
    how = _how_by_m(d, fmt, actw)
    if weight_only and asked_for_quant_acts:
        native = _NATIVE_WORDS.get(_declared_act(ck), "low-precision")
        return (f"{head} {runs} weight-only: {how}. Decode speed is set by memory bandwidth, as with "
                f"{_bits_like(ck)}; prefill runs at {actw} tensor-core speed, not {native}.")
    if weight_only:
        return (f"{head} {runs} as intended, weight-only: {how}. Decode is bandwidth-bound and gains from "
                f"the smaller weights; prefill runs at {actw} tensor-core speed.")
    gain = _ceiling_words(act, gpu)
    declared = _declared_act(ck)
    if declared != act:
        return (f"{head} {runs} with {actw} activations instead of {_NATIVE_WORDS.get(declared, declared)}: {fmt} "
                f"weights are converted in registers and meet {actw} activations on {mma}. Prefill gets the "
                f"{actw} compute ceiling{gain}, not the one the checkpoint was made for; decode stays "
                "bandwidth-bound.")
    return (f"{head} {runs} natively: {fmt} weights and {actw} activations meet on {mma}. Prefill and large "
            f"batches get the {actw} compute ceiling{gain}; small-batch decode stays bandwidth-bound.")


def _ceiling_words(act: str, gpu: GpuSpec) -> str:
    """' (8x the BF16 dense peak)' from this GPU's own table: the ratio differs by segment (GeForce
    Blackwell runs BF16 at half rate, B300 trades FP64 for FP4), so it is never a fixed 2x/4x."""
    key = _CEILING_PEAK.get(act)
    base_key = "bf16" if gpu.sm >= 80 else "fp16_fp32acc"   # capability by arch; a null peak is only unknown
    hi, lo = (gpu.peak(key), gpu.peak(base_key)) if key else (None, None)
    if not isinstance(hi, (int, float)) or not isinstance(lo, (int, float)) or lo <= 0:
        return ""
    ratio = hi / lo
    words = f"{ratio:.0f}x" if abs(ratio - round(ratio)) < 0.05 else f"{ratio:.1f}x"
    return f" ({words} the {'BF16' if base_key == 'bf16' else 'FP16'} dense peak)"


_PEAK_FOR_ACT = {"fp8_e4m3": ("fp8_fp32acc", "FP8"), "nvfp4": ("fp4", "FP4"), "mxfp4": ("fp4", "FP4"),
                 "int8": ("int8", "INT8")}


def _unused_native(d: LayerDecision, gpu: GpuSpec) -> str | None:
    """The tensor-core format the checkpoint asks for when the GPU has it but the path does not use it."""
    declared = _declared_act(d.checkpoint_scheme)
    if declared == d.activation_dtype or declared not in _PEAK_FOR_ACT or d.dequant == "cpu":
        return None
    key, words = _PEAK_FOR_ACT[declared]
    return words if gpu.supports(key) else None


def _unused_sentence(d: LayerDecision, gpu: GpuSpec, engine_name: str) -> list[str]:
    unused = _unused_native(d, gpu)
    if not unused:
        return []
    return [f"This GPU does have {unused} tensor cores, but {engine_name} does not use them here "
            "(the rejected candidates below say why)."]


def _declared_act(ck: str) -> str:
    if ck.startswith("W4A4-NVFP4"):
        return "nvfp4"
    if ck.startswith("W4A4-MXFP4"):
        return "mxfp4"
    if "A8" in ck and "INT8" in ck:
        return "int8"
    if "A8" in ck:
        return "fp8_e4m3"
    return "bf16"


def _how(fmt: str, actw: str, mma_class: str, dequant: str) -> str:
    mma = MMA_WORDS.get(mma_class, mma_class)
    if dequant == "memory":
        return f"{fmt} weights are expanded to {actw} in memory and multiplied on {mma}"
    if mma_class == "none":
        return f"a CUDA-core GEMV reads the {fmt} weights and converts them in registers (no tensor cores)"
    if dequant == "none":
        return f"{fmt} weights are multiplied as stored on {mma}"
    return f"{fmt} weights are unpacked in registers and multiplied on {mma}"


def _how_by_m(d: LayerDecision, fmt: str, actw: str) -> str:
    """How the weights meet the MMA, per band of rows M when the kernel switches with M."""
    if len(d.m_ranges) <= 1:
        return _how(fmt, actw, d.mma, d.dequant)
    parts = [f"{_rows_words(r)} {_how(fmt, actw, r.mma, r.dequant)}" for r in d.m_ranges]
    return "; ".join(parts)


def _rows_words(r) -> str:
    if r.m_max is None:
        return f"from {r.m_min:,} rows (tokens per call) on,"
    if r.m_min <= 1:
        return "one row (batch-1 decode):" if r.m_max == 1 else f"below {r.m_max + 1:,} rows,"
    return f"from {r.m_min:,} to {r.m_max:,} rows,"


def module_words(d: LayerDecision, limit: int = 4) -> str:
    """'in_proj_a, in_proj_b' from the module groups a decision covers."""
    short = list(dict.fromkeys(c.name.rsplit(".", 1)[-1] for c in d.modules))
    return ", ".join(short[:limit]) + (f" and {len(short) - limit} more" if len(short) > limit else "")


def _class_words(d: LayerDecision) -> str:
    if d.layer_class == "dense_linear":
        if d.modules:
            return f"dense layers ({module_words(d)})"
        return "dense layers (" + ", ".join(d.roles) + ")" if d.roles else "dense layers"
    return {"moe_experts": "MoE experts", "lm_head_embed": "lm_head/embeddings",
            "attention_kv": "attention"}.get(d.layer_class, d.layer_class)


def summarize(exp: Explanation, ck: CheckpointInfo, gpu: GpuSpec, engine_name: str) -> str:
    parts: list[str] = []
    failing = [d for d in exp.decisions if not d.runs]
    primary = _primary(exp, ck)
    mixed = len(ck.scheme_shares) > 1
    if failing:
        f = failing[0]
        what = f"the {_class_words(f)} ({f.checkpoint_scheme})"
        if f.error and f.error.startswith("no rule:"):
            parts.append(f"On your {gpu.name} the advisor cannot say how {engine_name} runs {what}: {f.error}.")
        else:
            parts.append(f"On your {gpu.name}, {engine_name} cannot run this {scheme_words(ck.label)} checkpoint "
                         f"as configured: {what} cannot run (\u201c{f.error}\u201d).")
            texts = list(f.reasons) + [w.meaning for w in f.warnings]
            remedy = next((r.split("Remedy: ", 1)[1] for r in texts if "Remedy: " in r), None)
            if remedy:
                parts.append(f"Remedy: {remedy}")
    if primary is not None and primary.runs:
        parts.append(_sentence_for(primary, gpu, lead=not failing, mixed=mixed))
        parts += _unused_sentence(primary, gpu, engine_name)
        for d in exp.decisions:
            if d is primary or not d.runs or d.layer_class not in ("dense_linear", "moe_experts"):
                continue
            if d.checkpoint_scheme in ("BF16", "FP16") and d.dequant != "cpu":
                continue   # unquantized side layers: listed per class below, not worth the summary
            if (d.checkpoint_scheme != primary.checkpoint_scheme or d.effective_scheme != primary.effective_scheme
                    or d.m_ranges != primary.m_ranges or d.kernel != primary.kernel):
                parts.append(_sentence_for(d, gpu, lead=False))
                parts += _unused_sentence(d, gpu, engine_name)
    kv = next((d for d in exp.decisions if d.layer_class == "attention_kv"), None)
    if kv is not None and kv.runs:
        parts.append(f"Attention runs on {kv.kernel} with the KV cache stored as {kv.kv_cache_dtype}.")
    # engines print each distinct message once (vLLM: logger.warning_once, keyed on the text)
    nwarn = len({w.text for d in exp.decisions for w in d.warnings})
    if nwarn:
        parts.append(f"{engine_name} prints {nwarn} warning{'s' if nwarn > 1 else ''} for this combination; "
                     "what each really means is listed below.")
    if len(ck.scheme_shares) > 1:
        shares = ", ".join(f"{s} {v:.0%}" for s, v in sorted(ck.scheme_shares.items(), key=lambda kv: -kv[1]))
        parts.append(f"Mixed checkpoint ({shares} of quantized bytes): its speed is bounded by the slowest path.")
    return " ".join(parts)
