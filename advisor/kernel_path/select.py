"""The one selection loop every engine shares: walk a rule path's candidates, return a decision.

Pure: inputs are frozen records (GPU, layer facts, install options, rules); nothing is read from
the environment. Every rejected candidate carries the reason of the first gate it failed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from advisor.kernel_path.gates import Context, LayerFacts, dependency_state, describe, gates_pass, in_scope
from advisor.kernel_path.model import (CoveredModule, EngineWarning, KernelRange, LayerClass, LayerDecision, MmaClass,
                                       Rejection, is_layer_class, is_mma_class)
from advisor.kernel_path.rule_records import MmaSpec

if TYPE_CHECKING:   # annotations only: loaded rule files are rule_records (the schema without pydantic)
    from advisor.kernel_path.rules import Candidate, Failure, PathRule, Warn


def resolve_mma(c: Candidate, sm: int) -> MmaClass:
    return resolve_mma_spec(c.mma, sm)


def resolve_mma_spec(spec: MmaSpec, sm: int) -> MmaClass:
    name = _mma_name(spec, sm)
    assert is_mma_class(name), f"{name!r}: the rule loader admits only MMA_CLASSES (rules._check_mma)"
    return name


def _mma_name(spec: MmaSpec, sm: int) -> str:
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


def _decided_class(layer: LayerFacts) -> LayerClass:
    """The layer class a decision reports: a rule path's, which the rule loader checked (PathRule._lc)."""
    assert is_layer_class(layer.layer_class), f"{layer.layer_class!r} is not a layer class"
    return layer.layer_class


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
            layer_class=_decided_class(L), roles=L.roles, checkpoint_scheme=checkpoint_scheme,
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
    backend_flag = path.backend_flag or ""      # set whenever a backend is forced
    forced = ctx.flag(backend_flag) if backend_flag else ""
    forced = "" if forced in ("", "auto") else forced
    if forced:
        chosen_set = [c for c in candidates if c.backend == forced]
        if not chosen_set:
            if path.forced_unsupported == "error":
                return fail(f"{ctx.cli(backend_flag)} {forced} has no kernel for this layer",
                            f"{ctx.cli(backend_flag)} {forced} cannot serve {checkpoint_scheme} "
                            f"{L.layer_class}; the engine raises instead of falling back.")
            reasons.append(f"{ctx.cli(backend_flag)} {forced} has no kernel for this layer type; "
                           "the engine warns and falls back to automatic choice")
            forced = ""
    disabled = set()
    if path.disable_env:
        disabled = {x.strip() for x in ctx.env(path.disable_env).split(",") if x.strip()}

    dep_warned: set[str] = set()
    for c in candidates:
        if forced and c.backend != forced:
            rejected.append(Rejection(c.kernel, f"not selected: {ctx.cli(backend_flag)} {forced} "
                                                "restricts the choice to its kernels", c.source))
            continue
        if c.opt_in and not forced:
            how = (f" (select it with {ctx.cli(backend_flag)} {c.backend})"
                   if backend_flag and c.backend else "")
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
        reasons.append(f"{ctx.cli(backend_flag)} {forced} was requested and cannot run here")
    return fail(text, meaning, (f"source: {path.none_error.source}",))


def _chosen(path, c: Candidate, ctx: Context, checkpoint_scheme, reasons, rejected, warnings, kv,
            forced) -> LayerDecision:
    L = ctx.layer
    act = _act16(ctx) if c.activation == "act16" else c.activation
    mma = _mma_for_act(resolve_mma(c, ctx.sm), act)
    reasons = list(reasons)
    if forced:
        reasons.append(f"requested with {ctx.cli(path.backend_flag or '')} {forced}")
    passed = [g for g in c.gates if in_scope(g, ctx)]
    if passed:
        reasons.append(f"{c.kernel} passes its gates: " + "; ".join(describe(g, ctx) for g in passed))
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
        layer_class=_decided_class(L), roles=L.roles, checkpoint_scheme=checkpoint_scheme,
        effective_scheme=effective, kernel=c.kernel, mma=mma if runs else "none", activation_dtype=act,
        dequant=c.dequant, runs=runs, reasons=tuple(reasons), rejected=tuple(rejected),
        warnings=tuple(_dedup(warnings)), source=c.source, kv_cache_dtype=kv, error=error,
        modules=_covered(L), m_ranges=ranges)


def _mma_for_act(mma: MmaClass, act: str) -> MmaClass:
    return "hmma_f16" if act == "fp16" and mma == "hmma_bf16" else mma   # Turing/FP16 engines: f16 mma.sync


def _m_ranges(c: Candidate, ctx: Context, act: str, mma: MmaClass) -> tuple[KernelRange, ...]:
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


def _dedup(ws):
    seen, out = set(), []
    for w in ws:
        if w.text not in seen:
            seen.add(w.text)
            out.append(w)
    return out
