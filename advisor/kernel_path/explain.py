"""explain(): which kernel each engine runs for each layer class of a checkpoint on a GPU, and why.

Public entry points: :func:`explain` (one GPU), :func:`explain_all_gpus` (the GPU table, for the
compatibility matrix) and :func:`explain_kv` (explain's attention/KV decision alone, for the tuner's KV
dtypes). All are pure over frozen inputs; rule files are read (and cached) from profiles/engines/.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, cast

from advisor.checkpoint.model import ActQuant, CheckpointInfo, ModuleGroup, WeightQuant
from advisor.errors import UsageError
from advisor.gpu_spec import GpuSpec
from advisor.kernel_path.default_install import resolve_install
from advisor.kernel_path.config_load import (engine_kv_cache, engine_view, layer_load_facts, load_summary,
                                             model_level, overrides_layers, resolve_load)
from advisor.kernel_path.model import (CoveredModule, EngineWarning, Explanation, LayerClass, LayerDecision,
                                      ModelLoad)
from advisor.kernel_path.options import InstallOptions
from advisor.kernel_path.rule_files import load_rules
from advisor.kernel_path.gates import Context, LayerFacts, dependency_state, gates_pass
from advisor.kernel_path.select import select
from advisor.kernel_path.summary import summarize

if TYPE_CHECKING:   # annotations only: loaded rule files are rule_records (the schema without pydantic)
    from advisor.kernel_path.rules import RuleFile

# Which layer class each checkpoint role belongs to (roles that are no GEMM are skipped).
ROLE_CLASS = {
    "attn_qkv": "dense_linear", "attn_o": "dense_linear", "gdn_in_proj": "dense_linear",
    "gdn_out_proj": "dense_linear", "mlp_gate_up": "dense_linear", "mlp_down": "dense_linear",
    "shared_expert": "dense_linear", "router": "dense_linear", "mtp": "dense_linear",
    "vision": "dense_linear", "other": "dense_linear", "expert": "moe_experts",
    "lm_head": "lm_head_embed", "embed": "lm_head_embed",
}
_SINK_MODELS = ("gpt_oss",)
_CLASS_ORDER = {"dense_linear": 0, "moe_experts": 1, "attention_kv": 2, "lm_head_embed": 3}


def explain(checkpoint: CheckpointInfo, gpu: GpuSpec, *, gpus: int = 1, engine: str = "vllm",
            version: str | None = None, options: InstallOptions = InstallOptions(),
            rules_dir: Path | None = None) -> Explanation:
    """The kernel path ENGINE takes for CHECKPOINT on GPU, per layer class, with reasons."""
    rules, note = load_rules(engine, version, rules_dir)
    _validate_options(rules, options)
    options = resolve_install(rules, options)
    return _explain(checkpoint, gpu, gpus, rules, version, note, options)


def explain_all_gpus(checkpoint: CheckpointInfo, engine: str = "vllm", *, version: str | None = None,
                     options: InstallOptions = InstallOptions(), gpus: int = 1,
                     table: Iterable[GpuSpec] | None = None,
                     rules_dir: Path | None = None) -> tuple[Explanation, ...]:
    """explain() for every GPU in the table (or TABLE), in table order."""
    if table is None:
        from advisor.gpu_table import load_gpu_table

        loaded = load_gpu_table()
        table = loaded.values() if isinstance(loaded, dict) else loaded
    rules, note = load_rules(engine, version, rules_dir)
    _validate_options(rules, options)
    options = resolve_install(rules, options)
    return tuple(_explain(checkpoint, g, gpus, rules, version, note, options) for g in table)


def explain_kv(checkpoint: CheckpointInfo, gpu: GpuSpec, *, gpus: int = 1, engine: str = "vllm",
               version: str | None = None, options: InstallOptions = InstallOptions(),
               rules_dir: Path | None = None) -> LayerDecision | None:
    """explain()'s attention/KV decision for these options, without deciding the GEMM layers: the same
    record (or the same error) explain() would give, at the cost of the config-loading stage and one
    attention rule. None when the model has no attention, so explain() makes no such decision.
    tests/kernel_path/test_explain_kv.py holds it equal to explain() over GPUs, engines, demos and KV dtypes."""
    rules, note = load_rules(engine, version, rules_dir)
    _validate_options(rules, options)
    options = resolve_install(rules, options)
    ck = checkpoint
    if not (ck.arch.num_attention_heads or ck.arch.kv_layers or ck.arch.mla):
        return None
    if not any(ROLE_CLASS.get(m.role) in ("dense_linear", "moe_experts") for m in ck.modules):
        # attention would head the decisions and carry explain's start-up warnings: decide them all
        full = _explain(ck, gpu, gpus, rules, version, note, options)
        return next(d for d in full.decisions if d.layer_class == "attention_kv")
    tp = options.tp if options.tp is not None else max(1, gpus)
    load = resolve_load(ck, gpu, rules, options)
    decision = _decide_attention(ck, load, gpu, rules, options, tp)
    if load is not None and overrides_layers(load, ck):
        decision = model_level(decision, load, rules.display_name)
    return decision


def _validate_options(rules: RuleFile, options: InstallOptions) -> None:
    for name, value in options.flags:
        spec = rules.flags.get(name)
        if spec is None:
            known = ", ".join(s.cli for s in rules.flags.values()) or "none"
            raise UsageError(f"{rules.display_name} has no flag {name.replace('_', '-')!r} in the advisor's "
                             f"rules (known: {known})")
        if value not in spec.values:
            raise UsageError(f"{spec.cli} {value!r} is not valid for {rules.display_name} "
                             f"(choose from {', '.join(spec.values)})")
    if options.kv_cache_dtype is not None and options.kv_cache_dtype not in rules.kv_cache_dtypes:
        raise UsageError(f"--kv-cache-dtype {options.kv_cache_dtype!r} is not valid for {rules.display_name} "
                         f"(choose from {', '.join(rules.kv_cache_dtypes)})")


def _explain(ck: CheckpointInfo, gpu: GpuSpec, gpus: int, rules: RuleFile, requested: str | None,
             note: str | None, options: InstallOptions) -> Explanation:
    tp = options.tp if options.tp is not None else max(1, gpus)
    # the engine's config-loading stage first: its method (and per-model rewrites) is what layers are built for
    load = resolve_load(ck, gpu, rules, options)
    seen = layer_load_facts(load, ck, rules)
    # a model-level outcome replaces the layers' own answers
    deciding = load if overrides_layers(load, ck) else None
    unrecognised = deciding is not None and deciding.outcome == "unquantized"
    decisions: list[LayerDecision] = []
    for facts, scheme, _module in _layer_groups(ck, tp):
        facts = replace(facts, load=seen)
        decisions.append(_decide(engine_view(facts) if unrecognised else facts, scheme, gpu, rules, options, tp))
    if ck.arch.num_attention_heads or ck.arch.kv_layers or ck.arch.mla:
        decisions.append(_decide_attention(ck, load, gpu, rules, options, tp))
    decisions = _merge(decisions)
    decisions.sort(key=lambda d: _CLASS_ORDER.get(d.layer_class, 9))
    decisions = _startup_warnings(decisions, rules, options, gpu)
    if deciding is not None:
        decisions = [model_level(d, deciding, rules.display_name) for d in decisions]
    runs = all(d.runs for d in decisions) and (load is None or load.runs)
    exp = Explanation(
        engine=rules.engine, engine_version=rules.version, requested_version=requested,
        version_note=note, gpu_id=gpu.id, gpus=gpus, checkpoint_label=ck.label,
        decisions=tuple(decisions), summary="", runs=runs, load=load)
    if deciding is not None:
        return replace(exp, summary=load_summary(deciding, rules.display_name, gpu.name))
    return replace(exp, summary=summarize(exp, ck, gpu, rules.display_name))


def _startup_warnings(decisions: list[LayerDecision], rules: RuleFile, options: InstallOptions,
                      gpu: GpuSpec) -> list[LayerDecision]:
    """Start-up messages that do not belong to one layer (a disabled dependency, the FP16 fallback on
    GPUs without BF16): shown once, on the first decision."""
    if not decisions:
        return decisions
    shown = {w.text for d in decisions for w in d.warnings}
    extra = []
    tw = rules.act16_turing_warning
    if tw and gpu.sm < 80 and not rules.activation_dtype:
        text = tw.text.replace("{gpu_name}", gpu.name).replace("{cc}", gpu.cc_str)
        extra.append(EngineWarning(text, tw.meaning, tw.source))
    for dep in rules.dependencies.values():
        w = dep.disabled_warning
        if w and w.text not in shown and dependency_state(dep, options)[0] == "disabled":
            extra.append(EngineWarning(w.text, w.meaning, w.source))
    if extra:
        decisions[0] = replace(decisions[0], warnings=decisions[0].warnings + tuple(extra))
    return decisions


def _layer_groups(ck: CheckpointInfo, tp: int = 1):
    """(LayerFacts, checkpoint scheme, module) for every GEMM-bearing module group."""
    out = []
    seen_lm = False
    for m in ck.modules:            # kept_bf16 is a subset of modules, not extra groups
        cls = ROLE_CLASS.get(m.role)
        if cls is None:
            continue
        seen_lm = seen_lm or cls == "lm_head_embed"
        out.append((_facts(ck, m, cls, tp), m.scheme, m))
    if not seen_lm and ck.arch.vocab_size:
        # Every decoder LM has an embedding and an lm_head; unlisted means kept in 16 bits.
        m = ModuleGroup(name="lm_head", role="lm_head", scheme="BF16", weight=WeightQuant(),
                        act=ActQuant(), shape=(ck.arch.vocab_size, ck.arch.hidden_size or 1))
        out.append((_facts(ck, m, "lm_head_embed", tp), "BF16", m))
    return out


# Row-parallel projections split K (the input) across tensor-parallel ranks; the others split N.
_ROW_PARALLEL_ROLES = ("attn_o", "gdn_out_proj", "mlp_down")
_ROW_PARALLEL_NAMES = ("down_proj", "o_proj", "out_proj", "dense_4h_to_h", "fc2", "w2", "attn.proj")
_REPLICATED_ROLES = ("router",)
# LatentMoE's projections into and out of the experts' latent width are ReplicatedLinear: every rank runs the
# whole GEMM (vllm/model_executor/models/nemotron_h.py:197-213@0.33.0, sglang/srt/models/nemotron_h.py:326-339
# @0.5.23; advisor.cost.weights.REPLICATED_NAMES charges them so).
_REPLICATED_NAMES = ("fc1_latent_proj", "fc2_latent_proj")


def tp_shape(m: ModuleGroup, tp: int) -> tuple[int, int] | None:
    """One member's (N, K) on one GPU: engines gate their kernels on the partition they hold (vLLM:
    output/input_size_per_partition; column-parallel layers split N, row-parallel layers split K)."""
    if m.shape is None or tp <= 1 or m.role in _REPLICATED_ROLES or m.name.endswith(_REPLICATED_NAMES):
        return m.shape
    n, k = m.shape
    row = m.role in _ROW_PARALLEL_ROLES or (m.role not in ("attn_qkv", "gdn_in_proj", "mlp_gate_up", "lm_head")
                                            and m.name.endswith(_ROW_PARALLEL_NAMES))
    if row:
        return n, -(-k // tp)
    return -(-n // tp), k


def _gptq_act_order(m: ModuleGroup) -> bool:
    """GPTQ desc_act=True with a group size (one group per channel makes the ordering a no-op)."""
    return bool(m.weight.act_order) and m.weight.granularity == "group"


def _facts(ck: CheckpointInfo, m: ModuleGroup, cls: str, tp: int = 1) -> LayerFacts:
    w, a = m.weight, m.act
    return LayerFacts(
        layer_class=cls, scheme=m.scheme, roles=(m.role,), producer=ck.producer, quant_method=ck.quant_method,
        model_type=ck.arch.model_type, weight_format=w.format, weight_granularity=w.granularity,
        group_size=w.group_size, block=w.block or None, symmetric=w.symmetric,
        act_order=_gptq_act_order(m), act_format=a.format, act_granularity=a.granularity, act_dynamic=a.dynamic,
        shape=tp_shape(m, tp), module=m.name, count=m.count, head_dim=ck.arch.head_dim, mla=ck.arch.mla is not None,
        attention_sinks=(ck.arch.model_type or "") in _SINK_MODELS)


def _context(facts: LayerFacts, gpu: GpuSpec, rules: RuleFile, options: InstallOptions, tp: int) -> Context:
    return Context(sm=gpu.sm, gpu_name=gpu.name, rules=rules, options=options, tp=tp, layer=facts)


def _decide(facts: LayerFacts, ck_scheme: str, gpu: GpuSpec, rules: RuleFile, options: InstallOptions,
            tp: int) -> LayerDecision:
    reasons: list[str] = []
    warnings: list[EngineWarning] = []
    ctx = _context(facts, gpu, rules, options, tp)
    for d in rules.downgrades:
        if facts.layer_class in d.layer_classes and ctx.layer.scheme == d.from_scheme \
                and gates_pass(d.when, ctx) is None:
            act = "none" if "A16" in d.to_scheme else ctx.layer.act_format
            ctx = replace(ctx, layer=replace(ctx.layer, scheme=d.to_scheme, act_format=act))
            reasons.append(f"scheme downgrade {d.from_scheme} -> {d.to_scheme}: {d.reason} ({d.source})")
            warnings += [EngineWarning(w.text, w.meaning, w.source) for w in d.warnings]
    path = _find_path(rules, ctx)
    if path is None and facts.layer_class == "lm_head_embed":
        ctx_dense = replace(ctx, layer=replace(ctx.layer, layer_class="dense_linear"))
        path = _find_path(rules, ctx_dense)
        if path is not None:
            reasons.append("a quantized lm_head uses the dense linear kernels of its scheme")
            decision = select(path, ctx_dense, checkpoint_scheme=ck_scheme, pre_reasons=tuple(reasons),
                              pre_warnings=tuple(warnings))
            return replace(decision, layer_class="lm_head_embed")
    if path is None:
        return _no_rule(ctx, ck_scheme, rules, reasons, warnings)
    if path.note:
        reasons.insert(0, path.note)
    return select(path, ctx, checkpoint_scheme=ck_scheme, pre_reasons=tuple(reasons),
                  pre_warnings=tuple(warnings))


def _find_path(rules: RuleFile, ctx: Context):
    for p in rules.paths:
        if p.layer_class == ctx.layer.layer_class and ctx.layer.scheme in p.schemes \
                and gates_pass(p.when, ctx) is None:
            return p
    return None


def _no_rule(ctx: Context, ck_scheme: str, rules: RuleFile, reasons, warnings) -> LayerDecision:
    L = ctx.layer
    msg = (f"no rule: the advisor's {rules.display_name} rules do not cover {L.scheme} "
           f"({L.producer}) {L.layer_class.replace('_', ' ')}")
    from advisor.kernel_path.formats import foreign_reason

    foreign = foreign_reason(L.scheme, rules.engine, rules.display_name)   # EXL2, MLX, GGUF, ...: who loads them
    return LayerDecision(
        layer_class=cast(LayerClass, L.layer_class),        # LayerFacts is per layer class here ("model": loads only)
        roles=L.roles, checkpoint_scheme=ck_scheme, effective_scheme=L.scheme,
        kernel=None, mma="none", activation_dtype="bf16", dequant="none", runs=False,
        reasons=tuple(reasons + [foreign or msg + "; the engine's behaviour is unknown to the advisor, "
                                 "not known to fail"]),
        warnings=tuple(warnings), kv_cache_dtype=L.scheme if L.layer_class == "attention_kv" else None,
        error=foreign or msg, modules=(CoveredModule(L.module, L.shape, L.count),) if L.module else ())


def _decide_attention(ck: CheckpointInfo, load: ModelLoad | None, gpu: GpuSpec, rules: RuleFile,
                      options: InstallOptions, tp: int) -> LayerDecision:
    # the KV quantization the engine finds declared in the file it reads (none when built unquantized)
    kv_ck = replace(ck, kv_cache_quant=engine_kv_cache(load, ck, rules)) if load is not None else ck
    return _decide_kv(kv_ck, gpu, rules, options, tp)


def _decide_kv(ck: CheckpointInfo, gpu: GpuSpec, rules: RuleFile, options: InstallOptions, tp: int) -> LayerDecision:
    reasons = []
    declared = ck.kv_cache_quant
    if options.kv_cache_dtype is not None:
        kv = options.kv_cache_dtype
        reasons.append(f"KV cache dtype {kv} requested with --kv-cache-dtype")
    elif (ck.producer in rules.kv_from_checkpoint and declared in ("fp8", "nvfp4")
          and (not rules.kv_from_checkpoint_names or declared in rules.kv_from_checkpoint_names)):
        kv = rules.kv_from_checkpoint_names.get(declared, declared)
        reasons.append(f"the checkpoint declares {declared} KV cache quantization and {rules.display_name} "
                       f"uses it when --kv-cache-dtype is auto ({rules.kv_from_checkpoint_source})")
    else:
        kv = rules.kv_default
        if declared:
            reasons.append(f"the checkpoint ships {declared} KV scales, but {rules.display_name} stores the KV "
                           f"cache in the model dtype unless --kv-cache-dtype asks for {declared}")
    arch = ck.arch
    roles = ("attention",) + (("mla",) if arch.mla else ())
    facts = LayerFacts(layer_class="attention_kv", scheme=kv, roles=roles, producer=ck.producer,
                       model_type=arch.model_type, head_dim=arch.head_dim, mla=arch.mla is not None,
                       attention_sinks=(arch.model_type or "") in _SINK_MODELS)
    ctx = _context(facts, gpu, rules, options, tp)
    ck_scheme = f"KV {declared}" if declared else "KV bf16"
    path = _find_path(rules, ctx)
    if path is None:
        # a cache that cannot be served is named by the dtype asked for, not by what the checkpoint declares
        asked = f"KV {_KV_NAMES.get(kv, kv)}" if kv != "auto" else ck_scheme
        return _no_rule(ctx, asked, rules, reasons, [])
    if path.note:
        reasons.insert(0, path.note)
    d = select(path, ctx, checkpoint_scheme=ck_scheme, pre_reasons=tuple(reasons))
    stored = _KV_NAMES.get(kv, kv) if kv != "auto" else d.activation_dtype
    eff = f"KV {stored}" if d.effective_scheme == f"KV {kv}" else d.effective_scheme
    # a 16-bit cache is read as is: the candidate's per-tile dequant applies to quantized caches only
    dequant = "none" if stored in ("bf16", "fp16", "float16", "bfloat16") and d.dequant == "registers" else d.dequant
    return replace(d, kv_cache_dtype=stored, effective_scheme=eff, dequant=dequant,
                   checkpoint_scheme=d.checkpoint_scheme if d.runs else eff)


# Engine spellings -> one name per stored KV dtype (what the cost model sizes).
_KV_NAMES = {"bfloat16": "bf16", "float16": "fp16", "half": "fp16", "fp8": "fp8_e4m3", "float8": "fp8_e4m3",
             "fp4": "fp4_e2m1", "nvfp4_4over6": "nvfp4"}


def _merge(decisions: list[LayerDecision]) -> list[LayerDecision]:
    """One decision per (class, scheme, outcome, kernel by M); roles and modules accumulate in first-seen
    order."""
    merged: dict[tuple, LayerDecision] = {}
    for d in decisions:
        key = (d.layer_class, d.checkpoint_scheme, d.effective_scheme, d.kernel, d.mma, d.runs, d.error,
               d.m_ranges)
        if key in merged:
            prev = merged[key]
            roles = prev.roles + tuple(r for r in d.roles if r not in prev.roles)
            mods = prev.modules + tuple(c for c in d.modules if c not in prev.modules)
            merged[key] = replace(prev, roles=roles, modules=mods)
        else:
            merged[key] = d
    return list(merged.values())
