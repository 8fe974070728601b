"""Gate conditions as a registry: each condition key of a rule file's gate maps to its check (None when it
holds, else why not, in plain words) and its description (why a passed gate passed, for explain's reasons).

The YAML keys and their types stay declared on ``advisor.kernel_path.rules.Gate`` (the rule-file schema);
adding a condition means a field there and one ``@condition`` function here.
Also here: what a gate may ask about (LayerFacts, Context) and the scope keys (``if_*``).
Over 400 lines because it holds all 42 conditions, a few lines each: one place to read what any gate key means.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

from advisor.kernel_path.options import InstallOptions

if TYPE_CHECKING:   # annotations only: loaded rule files are rule_records (the schema without pydantic)
    from advisor.kernel_path.rules import Dependency, Gate, RuleFile


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

    def env(self, name: str) -> str:
        """The variable as set, else the engine's default ('' when it has none)."""
        v = self.options.env_value(name)
        return v if v is not None else self.rules.env_defaults.get(name, "")

    def flag(self, name: str) -> str:
        """The engine flag as given, else its declared default ('' when undeclared)."""
        v = self.options.flag(name)
        if v is not None:
            return v
        spec = self.rules.flags.get(name)
        return spec.default if spec else ""

    def cli(self, name: str) -> str:
        """The flag as typed on the engine's command line."""
        spec = self.rules.flags.get(name)
        return spec.cli if spec else f"--{name}"


def dependency_state(dep: Dependency, options: InstallOptions) -> tuple[str, str]:
    """('ok'|'missing'|'disabled', reason)."""
    if not all(options.fact(f) for f in dep.installed):
        return "missing", dep.missing
    if dep.usable_if_any and not any(options.fact(f) for f in dep.usable_if_any):
        return "disabled", dep.disabled
    return "ok", ""


# ------------------------------------------------------------------ the registry

Check = Callable[[Any, Context], "str | None"]     # (the gate's value, context) -> None when it holds, else why not
Describe = Callable[[str, Any, Context], str]      # (condition, value, context) -> why it passed


def _as_written(name: str, value: Any, ctx: Context) -> str:
    return f"{name.replace('_', ' ')} {value}"


def _gpu_allowed(name: str, value: Any, ctx: Context) -> str:
    return f"sm_{ctx.sm} allowed ({name.replace('_', ' ')} {value})"


@dataclass(frozen=True)
class Condition:
    check: Check
    describe: Describe


CONDITIONS: dict[str, Condition] = {}


def condition(name: str, describe: Describe = _as_written) -> Callable[[Check], Check]:
    def register(check: Check) -> Check:
        CONDITIONS[name] = Condition(check, describe)
        return check
    return register


def _sm_list(values: list[int]) -> str:
    return ", ".join(f"sm_{v}" for v in values)


def _fam_list(values: list[int]) -> str:
    return ", ".join(f"sm_{v}x" for v in values)


# ---- the GPU

@condition("sm_min", _gpu_allowed)
def _sm_min(v: int, ctx: Context) -> str | None:
    return None if ctx.sm >= v else f"needs sm_{v} or newer; this GPU is sm_{ctx.sm}"


@condition("sm_max", _gpu_allowed)
def _sm_max(v: int, ctx: Context) -> str | None:
    return None if ctx.sm <= v else f"only up to sm_{v}; this GPU is sm_{ctx.sm}"


@condition("sm_in", _gpu_allowed)
def _sm_in(v: list[int], ctx: Context) -> str | None:
    return None if ctx.sm in v else f"only on {_sm_list(v)}; this GPU is sm_{ctx.sm}"


@condition("sm_not_in", _gpu_allowed)
def _sm_not_in(v: list[int], ctx: Context) -> str | None:
    return None if ctx.sm not in v else f"not used on sm_{ctx.sm}"


@condition("family_in", _gpu_allowed)
def _family_in(v: list[int], ctx: Context) -> str | None:
    return None if ctx.family in v else f"only on {_fam_list(v)}; this GPU is sm_{ctx.sm}"


@condition("family_not_in", _gpu_allowed)
def _family_not_in(v: list[int], ctx: Context) -> str | None:
    return None if ctx.family not in v else f"not used on sm_{ctx.family}x (this GPU: sm_{ctx.sm})"


# ---- the install: dependencies, environment, engine flags

def _dependency_available(name: str, value: str, ctx: Context) -> str:
    return f"{ctx.rules.dependencies[value].label} available"


def _dependency_absent(name: str, value: str, ctx: Context) -> str:
    return f"{ctx.rules.dependencies[value].label} not available"


@condition("requires", _dependency_available)
def _requires(v: str, ctx: Context) -> str | None:
    state, why = dependency_state(ctx.rules.dependencies[v], ctx.options)
    return None if state == "ok" else why


@condition("lacks", _dependency_absent)
def _lacks(v: str, ctx: Context) -> str | None:
    dep = ctx.rules.dependencies[v]
    return f"{dep.label} is available" if dependency_state(dep, ctx.options)[0] == "ok" else None


@condition("env_in")
def _env_in(v: dict[str, list[str]], ctx: Context) -> str | None:
    for name, values in v.items():
        cur = ctx.env(name)
        if cur not in values:
            return f"needs {name}={'|'.join(values)} (now: {cur if cur else 'unset'})"
    return None


@condition("env_not_in")
def _env_not_in(v: dict[str, list[str]], ctx: Context) -> str | None:
    for name, values in v.items():
        cur = ctx.env(name)
        if cur in values:
            shown = cur if cur else "unset"
            return f"disabled by {name}={shown} (now: {shown})"
    return None


@condition("flag_in")
def _flag_in(v: dict[str, list[str]], ctx: Context) -> str | None:
    for name, values in v.items():
        cur = ctx.flag(name)
        if cur not in values:
            return f"needs {ctx.cli(name)} {' or '.join(values)} (now: {cur})"
    return None


@condition("flag_not_in")
def _flag_not_in(v: dict[str, list[str]], ctx: Context) -> str | None:
    for name, values in v.items():
        cur = ctx.flag(name)
        if cur in values:
            return f"not used with {ctx.cli(name)} {cur}"
    return None


# ---- the checkpoint's quantization

@condition("producer_in")
def _producer_in(v: list[str], ctx: Context) -> str | None:
    p = ctx.layer.producer
    return None if p in v else f"only for {', '.join(v)} checkpoints (this one: {p})"


@condition("producer_not_in")
def _producer_not_in(v: list[str], ctx: Context) -> str | None:
    p = ctx.layer.producer
    return None if p not in v else f"not for {p} checkpoints"


@condition("quant_method_in")
def _quant_method_in(v: list[str], ctx: Context) -> str | None:
    qm = (ctx.layer.quant_method or "").upper()
    return None if qm in v else f"only for {', '.join(v)} checkpoints"


@condition("quant_method_not_in")
def _quant_method_not_in(v: list[str], ctx: Context) -> str | None:
    qm = (ctx.layer.quant_method or "").upper()
    return None if qm not in v else f"not for {qm} checkpoints"


@condition("weight_format_in")
def _weight_format_in(v: list[str], ctx: Context) -> str | None:
    f = ctx.layer.weight_format
    return None if f in v else f"weights must be {' or '.join(v)} (here: {f})"


@condition("weight_granularity_in")
def _weight_granularity_in(v: list[str], ctx: Context) -> str | None:
    g = ctx.layer.weight_granularity
    return None if g in v else f"needs {' or '.join(v)} weight scales (here: {g})"


@condition("act_format_in")
def _act_format_in(v: list[str], ctx: Context) -> str | None:
    f = ctx.layer.act_format
    return None if f in v else (
        f"needs {' or '.join(v)} activations (here: {f if f != 'none' else '16-bit, unquantized'})")


@condition("act_granularity_in")
def _act_granularity_in(v: list[str], ctx: Context) -> str | None:
    g = ctx.layer.act_granularity
    return None if g in v else f"needs {' or '.join(v)} activation scales (here: {g or 'none'})"


@condition("act_dynamic")
def _act_dynamic(v: bool, ctx: Context) -> str | None:
    if ctx.layer.act_dynamic is None or ctx.layer.act_dynamic == v:
        return None
    return "needs dynamic activation scales (here: static)" if v else "needs static activation scales (here: dynamic)"


@condition("group_size_in")
def _group_size_in(v: list[int], ctx: Context) -> str | None:
    gs = ctx.layer.group_size if ctx.layer.group_size is not None else -1
    return None if gs in v else f"needs group size {', '.join(str(x) for x in v)} (-1 = per channel; here: {gs})"


@condition("block_in")
def _block_in(v: list[list[int]], ctx: Context) -> str | None:
    block = ctx.layer.block
    if block is None or list(block) in v:
        return None
    return f"needs weight blocks {', '.join('x'.join(map(str, b)) for b in v)} (here: {'x'.join(map(str, block))})"


@condition("symmetric")
def _symmetric(v: bool, ctx: Context) -> str | None:
    if ctx.layer.symmetric is None or ctx.layer.symmetric == v:
        return None
    return "needs symmetric weights (no zero points)" if v else "needs asymmetric weights (zero points)"


@condition("act_order")
def _act_order(v: bool, ctx: Context) -> str | None:
    if ctx.layer.act_order == v:
        return None
    return ("uses GPTQ group activation ordering (desc_act=True with groups)" if ctx.layer.act_order
            else "needs GPTQ group activation ordering")


# ---- the layer's shape and the model

@condition("shape_multiple")
def _shape_multiple(v: dict[str, int], ctx: Context) -> str | None:
    if ctx.layer.shape is None:
        return None
    n, k = ctx.layer.shape
    for dim, mult in v.items():
        val = n if dim == "n" else k
        if val % mult:
            return f"needs {dim.upper()} divisible by {mult} (this layer: {dim.upper()}={val})"
    return None


@condition("shape_multiple_any")
def _shape_multiple_any(v: list[dict[str, int]], ctx: Context) -> str | None:
    if ctx.layer.shape is None:
        return None
    n, k = ctx.layer.shape
    if any(all((n if d == "n" else k) % mult == 0 for d, mult in fam.items()) for fam in v):
        return None
    fams = " or ".join(" and ".join(f"{d.upper()}%{mult}" for d, mult in fam.items()) for fam in v)
    return f"needs {fams} == 0 (this layer on one GPU: N={n}, K={k})"


@condition("model_type_in")
def _model_type_in(v: list[str], ctx: Context) -> str | None:
    return None if ctx.layer.model_type in v else f"only for model types {', '.join(v)}"


@condition("role_in")
def _role_in(v: list[str], ctx: Context) -> str | None:
    return None if set(ctx.layer.roles) & set(v) else f"only for {', '.join(v)} layers"


def _excluded_model_types(name: str, value: list, ctx: Context) -> str:
    return _as_written(name, [ex.model_type for ex in value], ctx)


@condition("model_exclusions", _excluded_model_types)
def _model_exclusions(v: list, ctx: Context) -> str | None:
    for ex in v:
        if ctx.layer.model_type == ex.model_type and ex.sm_min <= ctx.sm <= ex.sm_max:
            return f"disabled for model type {ex.model_type} on sm_{ctx.sm}"
    return None


# ---- parallelism

@condition("tp_max")
def _tp_max(v: int, ctx: Context) -> str | None:
    return None if ctx.tp <= v else f"only with tensor parallel <= {v} (here: {ctx.tp})"


@condition("tp_min")
def _tp_min(v: int, ctx: Context) -> str | None:
    return None if ctx.tp >= v else f"only with tensor parallel >= {v} (here: {ctx.tp})"


@condition("ep_min")
def _ep_min(v: int, ctx: Context) -> str | None:
    ep = ctx.options.ep
    return None if ep >= v else f"only with expert parallel >= {v} (here: {ep})"


@condition("ep_max")
def _ep_max(v: int, ctx: Context) -> str | None:
    ep = ctx.options.ep
    return None if ep <= v else f"only with expert parallel <= {v} (here: {ep})"


# ---- attention

@condition("kv_dtype_in")
def _kv_dtype_in(v: list[str], ctx: Context) -> str | None:
    kv = ctx.layer.scheme
    return None if kv in v else f"does not support KV cache dtype {kv}"


@condition("head_dim_not_in")
def _head_dim_not_in(v: list[int], ctx: Context) -> str | None:
    hd = ctx.layer.head_dim
    return None if hd not in v else f"does not support head size {hd}"


@condition("head_dim_in")
def _head_dim_in(v: list[int], ctx: Context) -> str | None:
    hd = ctx.layer.head_dim
    if not hd or hd in v:
        return None
    return f"supports head sizes {', '.join(map(str, v))} only (this model: {hd})"


@condition("mla")
def _mla(v: bool, ctx: Context) -> str | None:
    return None if ctx.layer.mla == v else ("only for MLA models" if v else "not for MLA models")


@condition("attention_sinks")
def _attention_sinks(v: bool, ctx: Context) -> str | None:
    if ctx.layer.attention_sinks == v:
        return None
    return "needs attention sinks" if v else "does not support attention sinks (this model has them)"


# ---- always, and the config-loading stage

@condition("never")
def _never(v: str, ctx: Context) -> str | None:
    return v


@condition("config_in")
def _config_in(v: dict[str, list[str]], ctx: Context) -> str | None:
    facts = dict(ctx.layer.load)
    for name, values in v.items():
        cur = facts.get(name, "")
        if cur not in values:
            return f"needs {name} {' or '.join(x or '(none)' for x in values)} (here: {cur or '(none)'})"
    return None


@condition("config_not_in")
def _config_not_in(v: dict[str, list[str]], ctx: Context) -> str | None:
    facts = dict(ctx.layer.load)
    for name, values in v.items():
        cur = facts.get(name, "")
        if cur in values:
            return f"not for {name} {cur or '(none)'}"
    return None


# ------------------------------------------------------------------ using it

def in_scope(g: Gate, ctx: Context) -> bool:
    """The ``if_*`` keys hold: the gate applies here."""
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
    """None when the gate passes (or does not apply), else a non-empty reason."""
    if not in_scope(g, ctx):
        return None
    name = g.condition
    reason = CONDITIONS[name].check(getattr(g, name), ctx)
    if reason is None:
        return None
    return f"{reason} — {g.why}" if g.why else reason


def gates_pass(gates: list[Gate], ctx: Context) -> str | None:
    """None when every gate passes, else the first failure's reason."""
    for g in gates:
        r = gate_failure(g, ctx)
        if r is not None:
            return r
    return None


def describe(g: Gate, ctx: Context) -> str:
    """Why a gate that passed passed, as explain's reasons say it."""
    name = g.condition
    return CONDITIONS[name].describe(name, getattr(g, name), ctx)
