"""The KV-cache dtypes a plan may choose from: those `explain` accepts for the attention layers (never
one its decision rejects), with one 16-bit candidate, the model dtype's."""

from __future__ import annotations

from advisor.cost.engine_profile import EngineMemory
from advisor.cost.kv import KvDtype
from advisor.kernel_path.model import Explanation, LayerDecision


def kv_decision(explanation: Explanation) -> LayerDecision | None:
    for d in explanation.decisions:
        if d.layer_class == "attention_kv":
            return d
    return None


def allowed_kv(engine: EngineMemory, explanation: Explanation,
               kv_decisions: dict[str, LayerDecision] | None) -> tuple[tuple[KvDtype, ...], dict[str, str], KvDtype]:
    """KV dtypes `explain` accepted (never one its attention decision rejects)."""
    allowed: list[KvDtype] = []
    rejected: dict[str, str] = {}
    main = kv_decision(explanation)
    decisions = dict(kv_decisions or {})
    main_dt = engine.kv_dtype(main.kv_cache_dtype) if main is not None and main.kv_cache_dtype else None
    if main is not None and main_dt is not None:
        # the explanation's own dtype, unless a requested flag value of the same layout covers it
        same = [n for n, d in decisions.items() if (dt := engine.kv_dtype(n)) is not None
                and (dt.kind, dt.bits) == (main_dt.kind, main_dt.bits) and d.runs == main.runs]
        if same:
            main_dt = engine.kv_dtype(same[0])
        else:
            decisions.setdefault(main_dt.name, main)
    for name, d in decisions.items():
        dt = engine.kv_dtype(name)
        if dt is None:
            continue
        if d.runs:
            allowed.append(dt)
        else:
            rejected[name] = d.error or "; ".join(d.reasons) or "rejected by the attention backend"
    if main_dt is not None:
        default = main_dt
    else:
        default = engine.kv_dtype("auto") or engine.kv_dtypes[0]
        if main is None and default.name not in rejected:
            allowed.append(default)
    if not allowed:
        # nothing explain accepts: cost the default (the plan warns that it does not run)
        allowed.append(default)
    return tuple(dict.fromkeys(allowed)), rejected, default


def one_16bit_kv(engine: EngineMemory, allowed: tuple[KvDtype, ...], default: KvDtype, bf16: bool,
                 auto_is_model_dtype: bool = True) -> tuple[tuple[KvDtype, ...], KvDtype]:
    """Keep one 16-bit KV candidate: the model dtype's. A GPU without BF16 (sm_75) runs the model in
    FP16, so its 16-bit KV cache must be the engine's FP16 value, never bfloat16 (vLLM on Turing:
    "bfloat16 requires SM80+. Re-run with --kv-cache-dtype float16", triton_attn.py:510-532@0.33.0);
    with BF16 the BF16 value is the one 'auto' would give."""
    auto = engine.kv_dtype("auto")
    model_kind = auto.kind if auto is not None and auto.kind in ("bf16", "fp16") else "bf16"
    want = model_kind if bf16 else "fp16"       # FastLLM computes in FP16 even where BF16 exists
    drop = "fp16" if want == "bf16" else "bf16"
    named = [dt for dt in engine.kv_dtypes if dt.name != "auto"]
    repl = next((dt for dt in named if dt.kind == want), None)
    if repl is None and not bf16 and auto_is_model_dtype:
        repl = auto                         # e.g. SGLang has no FP16 value: 'auto' is the FP16 model dtype
    if repl is None:
        return allowed, default

    def swap(dt: KvDtype) -> KvDtype:
        return repl if dt.kind == drop and dt.name != "auto" and dt.name != repl.name else dt

    out = [swap(dt) for dt in allowed]
    if want == "fp16" and repl not in out and any(dt.kind in ("bf16", "fp16") for dt in allowed):
        out.append(repl)
    return tuple(dict.fromkeys(out)), swap(default)
