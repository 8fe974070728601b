"""The one selection loop every engine shares: walk a rule path's candidates, return a decision.

Pure: inputs are frozen records (GPU, layer facts, install options, rules); nothing is read from
the environment. Every rejected candidate carries the reason of the first gate it failed.
"""

from __future__ import annotations

from dataclasses import dataclass

from advisor.kernel_path.model import CoveredModule, EngineWarning, KernelRange, LayerDecision, Rejection
from advisor.kernel_path.options import InstallOptions
from advisor.kernel_path.rules import Candidate, Dependency, Failure, Gate, MmaSpec, PathRule, RuleFile, Warn


@dataclass(frozen=True)
class LayerFacts:
    """What the gates may ask about one layer group of one checkpoint."""

    layer_class: str
    scheme: str                       # after downgrades; attention: the KV dtype
    roles: tuple[str, ...] = ()
    producer: str = "none"
    quant_method: str | None = None   # the checkpoint config's quant_method / quant_algo
    model_type: str | None = None
    weight_format: str = "bf16"
    weight_granularity: str = "none"
    group_size: int | None = None
    block: tuple[int, int] | None = None
    symmetric: bool | None = None
    act_order: bool = False           # GPTQ desc_act=True with groups (group activation ordering)
    act_format: str = "none"
    act_granularity: str | None = None
    act_dynamic: bool | None = None
    shape: tuple[int, int] | None = None   # (N out, K in) of one member on one GPU (after the TP split)
    module: str = ""                  # the checkpoint module group these facts describe ('' = none, e.g. KV)
    count: int = 1                    # members in that group
    head_dim: int = 0
    mla: bool = False
    attention_sinks: bool = False
    load: tuple[tuple[str, str], ...] = ()   # the config-loading stage's facts (rules.LOAD_FACTS), incl. "method"


@dataclass(frozen=True)
class Context:
    sm: int
    gpu_name: str
    rules: RuleFile
    options: InstallOptions
    tp: int
    layer: LayerFacts

    @property
    def family(self) -> int:
        return self.sm // 10


def _sm_list(values: list[int]) -> str:
    return ", ".join(f"sm_{v}" for v in values)


def _fam_list(values: list[int]) -> str:
    return ", ".join(f"sm_{v}x" for v in values)


def dependency_state(dep: Dependency, options: InstallOptions) -> tuple[str, str]:
    """('ok'|'missing'|'disabled', reason)."""
    if not all(options.fact(f) for f in dep.installed):
        return "missing", dep.missing
    if dep.usable_if_any and not any(options.fact(f) for f in dep.usable_if_any):
        return "disabled", dep.disabled
    return "ok", ""


def _env(ctx: Context, name: str) -> str:
    v = ctx.options.env_value(name)
    return v if v is not None else ctx.rules.env_defaults.get(name, "")


def _flag(ctx: Context, name: str) -> str:
    v = ctx.options.flag(name)
    if v is not None:
        return v
    spec = ctx.rules.flags.get(name)
    return spec.default if spec else ""


def _cli(ctx: Context, name: str) -> str:
    spec = ctx.rules.flags.get(name)
    return spec.cli if spec else f"--{name}"


def _in_scope(g: Gate, ctx: Context) -> bool:
    if g.if_sm_min is not None and ctx.sm < g.if_sm_min:
        return False
    if g.if_sm_max is not None and ctx.sm > g.if_sm_max:
        return False
    if g.if_family_in is not None and ctx.family not in g.if_family_in:
        return False
    if g.if_kv_dtype_in is not None and ctx.layer.scheme not in g.if_kv_dtype_in:
        return False
    return True


def gate_failure(g: Gate, ctx: Context) -> str | None:
    """None when the gate passes, else a non-empty reason."""
    if not _in_scope(g, ctx):
        return None
    reason = _check(g, ctx)
    if reason is None:
        return None
    return f"{reason} — {g.why}" if g.why else reason


def _check(g: Gate, ctx: Context) -> str | None:  # noqa: C901 - one branch per condition kind
    L, sm = ctx.layer, ctx.sm
    c = g.condition
    if c == "sm_min":
        return None if sm >= g.sm_min else f"needs sm_{g.sm_min} or newer; this GPU is sm_{sm}"
    if c == "sm_max":
        return None if sm <= g.sm_max else f"only up to sm_{g.sm_max}; this GPU is sm_{sm}"
    if c == "sm_in":
        return None if sm in g.sm_in else f"only on {_sm_list(g.sm_in)}; this GPU is sm_{sm}"
    if c == "sm_not_in":
        return None if sm not in g.sm_not_in else f"not used on sm_{sm}"
    if c == "family_in":
        return None if ctx.family in g.family_in else f"only on {_fam_list(g.family_in)}; this GPU is sm_{sm}"
    if c == "family_not_in":
        return None if ctx.family not in g.family_not_in else f"not used on sm_{ctx.family}x (this GPU: sm_{sm})"
    if c == "requires":
        dep = ctx.rules.dependencies[g.requires]
        state, why = dependency_state(dep, ctx.options)
        return None if state == "ok" else why
    if c == "lacks":
        dep = ctx.rules.dependencies[g.lacks]
        return f"{dep.label} is available" if dependency_state(dep, ctx.options)[0] == "ok" else None
    if c in ("env_in", "env_not_in"):
        for name, values in (g.env_in or g.env_not_in).items():
            cur = _env(ctx, name)
            ok = (cur in values) if c == "env_in" else (cur not in values)
            if not ok:
                shown = cur if cur else "unset"
                rel = "needs" if c == "env_in" else "disabled by"
                return f"{rel} {name}={'|'.join(values) if c == 'env_in' else shown} (now: {shown})"
        return None
    if c in ("flag_in", "flag_not_in"):
        for name, values in (g.flag_in or g.flag_not_in).items():
            cur = _flag(ctx, name)
            ok = (cur in values) if c == "flag_in" else (cur not in values)
            if not ok:
                if c == "flag_in":
                    return f"needs {_cli(ctx, name)} {' or '.join(values)} (now: {cur})"
                return f"not used with {_cli(ctx, name)} {cur}"
        return None
    if c == "producer_in":
        return None if L.producer in g.producer_in else f"only for {', '.join(g.producer_in)} checkpoints (this one: {L.producer})"
    if c == "producer_not_in":
        return None if L.producer not in g.producer_not_in else f"not for {L.producer} checkpoints"
    if c == "act_order":
        if L.act_order == g.act_order:
            return None
        return ("uses GPTQ group activation ordering (desc_act=True with groups)" if L.act_order
                else "needs GPTQ group activation ordering")
    if c == "quant_method_in":
        qm = (L.quant_method or "").upper()
        return None if qm in g.quant_method_in else f"only for {', '.join(g.quant_method_in)} checkpoints"
    if c == "quant_method_not_in":
        qm = (L.quant_method or "").upper()
        return None if qm not in g.quant_method_not_in else f"not for {qm} checkpoints"
    if c == "weight_format_in":
        return None if L.weight_format in g.weight_format_in else f"weights must be {' or '.join(g.weight_format_in)} (here: {L.weight_format})"
    if c == "weight_granularity_in":
        return None if L.weight_granularity in g.weight_granularity_in else (
            f"needs {' or '.join(g.weight_granularity_in)} weight scales (here: {L.weight_granularity})")
    if c == "act_format_in":
        return None if L.act_format in g.act_format_in else (
            f"needs {' or '.join(g.act_format_in)} activations (here: {L.act_format if L.act_format != 'none' else '16-bit, unquantized'})")
    if c == "act_granularity_in":
        return None if L.act_granularity in g.act_granularity_in else (
            f"needs {' or '.join(g.act_granularity_in)} activation scales (here: {L.act_granularity or 'none'})")
    if c == "act_dynamic":
        if L.act_dynamic is None or L.act_dynamic == g.act_dynamic:
            return None
        return "needs dynamic activation scales (here: static)" if g.act_dynamic else "needs static activation scales (here: dynamic)"
    if c == "group_size_in":
        gs = L.group_size if L.group_size is not None else -1
        return None if gs in g.group_size_in else (
            f"needs group size {', '.join(str(x) for x in g.group_size_in)} (-1 = per channel; here: {gs})")
    if c == "block_in":
        if L.block is None or list(L.block) in g.block_in:
            return None
        return f"needs weight blocks {', '.join('x'.join(map(str, b)) for b in g.block_in)} (here: {'x'.join(map(str, L.block))})"
    if c == "symmetric":
        if L.symmetric is None or L.symmetric == g.symmetric:
            return None
        return "needs symmetric weights (no zero points)" if g.symmetric else "needs asymmetric weights (zero points)"
    if c == "shape_multiple":
        if L.shape is None:
            return None
        n, k = L.shape
        for dim, mult in g.shape_multiple.items():
            val = n if dim == "n" else k
            if val % mult:
                return f"needs {dim.upper()} divisible by {mult} (this layer: {dim.upper()}={val})"
        return None
    if c == "shape_multiple_any":
        if L.shape is None:
            return None
        n, k = L.shape
        if any(all((n if d == "n" else k) % mult == 0 for d, mult in fam.items()) for fam in g.shape_multiple_any):
            return None
        fams = " or ".join(" and ".join(f"{d.upper()}%{mult}" for d, mult in fam.items()) for fam in g.shape_multiple_any)
        return f"needs {fams} == 0 (this layer on one GPU: N={n}, K={k})"
    if c == "role_in":
        return None if set(L.roles) & set(g.role_in) else f"only for {', '.join(g.role_in)} layers"
    if c == "model_type_in":
        return None if L.model_type in g.model_type_in else f"only for model types {', '.join(g.model_type_in)}"
    if c == "model_exclusions":
        for ex in g.model_exclusions:
            if L.model_type == ex.model_type and ex.sm_min <= sm <= ex.sm_max:
                return f"disabled for model type {ex.model_type} on sm_{sm}"
        return None
    if c == "tp_max":
        return None if ctx.tp <= g.tp_max else f"only with tensor parallel <= {g.tp_max} (here: {ctx.tp})"
    if c == "tp_min":
        return None if ctx.tp >= g.tp_min else f"only with tensor parallel >= {g.tp_min} (here: {ctx.tp})"
    if c == "ep_min":
        return None if ctx.options.ep >= g.ep_min else f"only with expert parallel >= {g.ep_min} (here: {ctx.options.ep})"
    if c == "ep_max":
        return None if ctx.options.ep <= g.ep_max else f"only with expert parallel <= {g.ep_max} (here: {ctx.options.ep})"
    if c == "kv_dtype_in":
        return None if L.scheme in g.kv_dtype_in else f"does not support KV cache dtype {L.scheme}"
    if c == "head_dim_in":
        if not L.head_dim or L.head_dim in g.head_dim_in:
            return None
        return f"supports head sizes {', '.join(map(str, g.head_dim_in))} only (this model: {L.head_dim})"
    if c == "head_dim_not_in":
        return None if L.head_dim not in g.head_dim_not_in else f"does not support head size {L.head_dim}"
    if c == "mla":
        return None if L.mla == g.mla else ("only for MLA models" if g.mla else "not for MLA models")
    if c == "attention_sinks":
        return None if L.attention_sinks == g.attention_sinks else (
            "needs attention sinks" if g.attention_sinks else "does not support attention sinks (this model has them)")
    if c in ("config_in", "config_not_in"):
        facts = dict(L.load)
        for name, values in (g.config_in or g.config_not_in).items():
            cur = facts.get(name, "")
            if c == "config_in" and cur not in values:
                return f"needs {name} {' or '.join(v or '(none)' for v in values)} (here: {cur or '(none)'})"
            if c == "config_not_in" and cur in values:
                return f"not for {name} {cur or '(none)'}"
        return None
    if c == "never":
        return g.never
    raise AssertionError(f"unhandled gate condition {c}")


def gates_pass(gates: list[Gate], ctx: Context) -> str | None:
    for g in gates:
        r = gate_failure(g, ctx)
        if r is not None:
            return r
    return None


def resolve_mma(c: Candidate, sm: int) -> str:
    return resolve_mma_spec(c.mma, sm)


def resolve_mma_spec(spec: MmaSpec, sm: int) -> str:
    if isinstance(spec, str):
        return spec
    default = spec.get("default", "none")
    for key, val in spec.items():
        if key == "default":
            continue
        lo, _, hi = key.partition("-")
        if int(lo) <= sm <= int(hi or lo):
            return val
    return default


def _act16(ctx: Context) -> str:
    if ctx.rules.activation_dtype:
        return ctx.rules.activation_dtype
    return "fp16" if ctx.sm < 80 else "bf16"


def _ew(w: Warn, ctx: Context) -> EngineWarning:
    return EngineWarning(text=_fmt(w.text, ctx), meaning=_fmt(w.meaning, ctx), source=w.source)


def _fmt(text: str, ctx: Context) -> str:
    return (text.replace("{gpu_name}", ctx.gpu_name).replace("{sm}", str(ctx.sm))
            .replace("{cc}", f"{ctx.sm // 10}.{ctx.sm % 10}")
            .replace("{kv16}", "float16" if ctx.sm < 80 else "bfloat16"))


def _failure_text(f: Failure, ctx: Context) -> tuple[str, str]:
    meaning = _fmt(f.meaning, ctx)
    if f.remedy:
        meaning = f"{meaning} Remedy: {_fmt(f.remedy, ctx)}"
    return _fmt(f.text, ctx), meaning


def select(path: PathRule, ctx: Context, *, checkpoint_scheme: str, pre_reasons: tuple[str, ...] = (),
           pre_warnings: tuple[EngineWarning, ...] = ()) -> LayerDecision:
    """Walk PATH's candidates for CTX and return the decision with every rejection explained."""
    L = ctx.layer
    kv = L.scheme if L.layer_class == "attention_kv" else None
    reasons = list(pre_reasons)
    warnings = list(pre_warnings)
    rejected: list[Rejection] = []

    def fail(text: str, meaning: str, extra: tuple[str, ...] = ()) -> LayerDecision:
        return LayerDecision(
            layer_class=L.layer_class, roles=L.roles, checkpoint_scheme=checkpoint_scheme,
            effective_scheme=L.scheme if kv is None else f"KV {kv}", kernel=None, mma="none",
            activation_dtype=_act16(ctx), dequant="none", runs=False,
            reasons=tuple(reasons + [meaning, *extra]), rejected=tuple(rejected),
            warnings=tuple(_dedup(warnings)), source="", kv_cache_dtype=kv, error=text, modules=_covered(L))

    for r in tuple(ctx.rules.global_refusals) + tuple(path.refusals):
        why = gates_pass(r.unless, ctx)
        if why is not None:
            text, meaning = _failure_text(r, ctx)
            reasons.append(f"refused before kernel choice: {why}")
            return fail(text, meaning, (f"source: {r.source}",))

    candidates = list(path.candidates)
    forced = _flag(ctx, path.backend_flag) if path.backend_flag else ""
    forced = "" if forced in ("", "auto") else forced
    if forced:
        chosen_set = [c for c in candidates if c.backend == forced]
        if not chosen_set:
            if path.forced_unsupported == "error":
                return fail(f"{_cli(ctx, path.backend_flag)} {forced} has no kernel for this layer",
                            f"{_cli(ctx, path.backend_flag)} {forced} cannot serve {checkpoint_scheme} "
                            f"{L.layer_class}; the engine raises instead of falling back.")
            reasons.append(f"{_cli(ctx, path.backend_flag)} {forced} has no kernel for this layer type; "
                           "the engine warns and falls back to automatic choice")
            forced = ""
    disabled = set()
    if path.disable_env:
        disabled = {x.strip() for x in _env(ctx, path.disable_env).split(",") if x.strip()}

    dep_warned: set[str] = set()
    for c in candidates:
        if forced and c.backend != forced:
            rejected.append(Rejection(c.kernel, f"not selected: {_cli(ctx, path.backend_flag)} {forced} "
                                                "restricts the choice to its kernels", c.source))
            continue
        if c.opt_in and not forced:
            how = f" (select it with {_cli(ctx, path.backend_flag)} {c.backend})" if path.backend_flag and c.backend else ""
            rejected.append(Rejection(c.kernel, f"opt-in only: never chosen automatically{how}", c.source))
            continue
        if c.kernel in disabled:
            rejected.append(Rejection(c.kernel, f"listed in {path.disable_env}", c.source))
            continue
        why = gates_pass(c.gates, ctx)
        if why is not None:
            rejected.append(Rejection(c.kernel, why, c.source))
            for g in c.gates:
                if g.requires and g.requires not in dep_warned:
                    dep = ctx.rules.dependencies[g.requires]
                    if dependency_state(dep, ctx.options)[0] == "disabled" and dep.disabled_warning:
                        warnings.append(_ew(dep.disabled_warning, ctx))
                        dep_warned.add(g.requires)
            continue
        return _chosen(path, c, ctx, checkpoint_scheme, reasons, rejected, warnings, kv, forced)

    text, meaning = _failure_text(path.none_error, ctx)
    if forced:
        reasons.append(f"{_cli(ctx, path.backend_flag)} {forced} was requested and cannot run here")
    return fail(text, meaning, (f"source: {path.none_error.source}",))


def _chosen(path, c: Candidate, ctx: Context, checkpoint_scheme, reasons, rejected, warnings, kv, forced) -> LayerDecision:
    L = ctx.layer
    act = _act16(ctx) if c.activation == "act16" else c.activation
    mma = _mma_for_act(resolve_mma(c, ctx.sm), act)
    reasons = list(reasons)
    if forced:
        reasons.append(f"requested with {_cli(ctx, path.backend_flag)} {forced}")
    passed = [g for g in c.gates if _in_scope(g, ctx)]
    if passed:
        reasons.append(f"{c.kernel} passes its gates: " + "; ".join(_describe(g, ctx) for g in passed))
    else:
        reasons.append(f"{c.kernel} has no hardware gate and is the first candidate left")
    if c.note:
        reasons.append(_fmt(c.note, ctx))
    if c.activation == "act16" and ctx.sm < 80 and not ctx.rules.activation_dtype and ctx.rules.act16_turing:
        reasons.append(ctx.rules.act16_turing)
    warnings = list(warnings) + [_ew(w, ctx) for w in c.warnings]
    effective = c.effective_scheme or _weight_only(L.scheme, act)
    if kv is not None:
        effective = c.effective_scheme or f"KV {kv}"
    runs, error = True, None
    if c.crash is not None and gates_pass(c.crash.when, ctx) is None:
        text, meaning = _failure_text(c.crash, ctx)
        runs, error = False, text
        reasons.append(f"{c.kernel} is selected, then fails at run time on sm_{ctx.sm} (what it prints and "
                       "why: see the engine warnings)")
        warnings.append(EngineWarning(text=text, meaning=meaning, source=c.crash.source))
    ranges = _m_ranges(c, ctx, act, mma) if runs else ()
    if len(ranges) > 1:
        reasons.append(f"{c.kernel} switches kernel by rows M (tokens per call): "
                       + "; ".join(f"{r.label}: {r.kernel}" for r in ranges))
    return LayerDecision(
        layer_class=L.layer_class, roles=L.roles, checkpoint_scheme=checkpoint_scheme,
        effective_scheme=effective, kernel=c.kernel, mma=mma if runs else "none", activation_dtype=act,
        dequant=c.dequant, runs=runs, reasons=tuple(reasons), rejected=tuple(rejected),
        warnings=tuple(_dedup(warnings)), source=c.source, kv_cache_dtype=kv, error=error,
        modules=_covered(L), m_ranges=ranges)


def _mma_for_act(mma: str, act: str) -> str:
    return "hmma_f16" if act == "fp16" and mma == "hmma_bf16" else mma   # Turing/FP16 engines: f16 mma.sync


def _m_ranges(c: Candidate, ctx: Context, act: str, mma: str) -> tuple[KernelRange, ...]:
    """The candidate's kernel per band of rows M; one band (every M) when it never switches."""
    if not c.rows:
        return (KernelRange(1, None, c.kernel, mma, c.dequant, c.source),)
    out, lo = [], 1
    for r in c.rows:
        hi = None if r.below is None else r.below - 1
        out.append(KernelRange(lo, hi, r.kernel, _mma_for_act(resolve_mma_spec(r.mma, ctx.sm), act), r.dequant,
                               r.source, _fmt(r.note, ctx), tuple(r.launch_rows), r.single_launch_max,
                               r.read_bytes_per_element))
        lo = (hi or 0) + 1
    return tuple(out)


def _covered(L: LayerFacts) -> tuple[CoveredModule, ...]:
    return (CoveredModule(L.module, L.shape, L.count),) if L.module else ()


def _weight_only(scheme: str, act: str) -> str:
    """W4A4-NVFP4 computed with 16/32-bit activations is W4A16-NVFP4 (likewise W8A8-*)."""
    if act not in ("bf16", "fp16", "fp32") or "-" not in scheme:
        return scheme
    bits, fmt = scheme.split("-", 1)
    if bits in ("W4A4", "W8A8"):
        return f"{bits[:2]}A16-{fmt}"
    return scheme


def _describe(g: Gate, ctx: Context) -> str:
    c = g.condition
    if c == "requires":
        return f"{ctx.rules.dependencies[g.requires].label} available"
    if c == "lacks":
        return f"{ctx.rules.dependencies[g.lacks].label} not available"
    if c in ("sm_min", "sm_max", "sm_in", "sm_not_in", "family_in", "family_not_in"):
        return f"sm_{ctx.sm} allowed ({c.replace('_', ' ')} {getattr(g, c)})"
    val = getattr(g, c)
    if isinstance(val, list) and val and hasattr(val[0], "model_type"):
        val = [v.model_type for v in val]
    return f"{c.replace('_', ' ')} {val}"


def _dedup(ws):
    seen, out = set(), []
    for w in ws:
        if w.text not in seen:
            seen.add(w.text)
            out.append(w)
    return out
