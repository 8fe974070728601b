"""The engine's config-loading stage: what it makes of a checkpoint's quantization config before any
layer rule runs (rule data: RuleFile.config_loading).

It picks the file the engine reads, walks the engine's resolution steps (its normaliser, method overrides
and per-model rewrites, as ordered gates over the declaration) to the quantization method, and applies the
model-wide refusals (unknown method, minimum compute capability, activation dtype). The outcome is
model-level: a refused model has no layer to explain; a quantized checkpoint the engine does not recognise
is built unquantized. Pure over frozen inputs.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, TypedDict

from advisor.checkpoint.declared import DeclaredQuant, QuantDeclaration
from advisor.checkpoint.model import CheckpointInfo
from advisor.checkpoint.schemes import FOREIGN_LABELS
from advisor.gpu_spec import GpuSpec
from advisor.kernel_path.model import LayerDecision, ModelLoad
from advisor.kernel_path.options import InstallOptions
from advisor.kernel_path.gates import Context, LayerFacts, gates_pass

if TYPE_CHECKING:   # annotations only: loaded rule files are rule_records (the schema without pydantic)
    from advisor.kernel_path.rules import Failure, RuleFile

_UNQUANTIZED = ("BF16", "FP16")


def _declared(ck: CheckpointInfo) -> DeclaredQuant | None:
    return ck.declared if ck.declared is not None else declared_from_info(ck)


def load_facts(ck: CheckpointInfo, files: list[str]) -> dict[str, str]:
    """The facts the stage's gates see: the first declaration in FILES order and the model's identity."""
    declared = _declared(ck)
    decl = next((d for f in files for d in (declared.in_file(f),) if d is not None), None) if declared else None
    d = decl or QuantDeclaration(file="")
    return {
        "file": d.file, "quant_method": d.quant_method, "producer": d.producer, "quant_algo": d.quant_algo,
        "flat_quant_algo": d.flat_quant_algo, "legacy_modelopt": "yes" if d.legacy_modelopt else "no",
        "format": d.format, "moe_quant_algo": d.moe_quant_algo, "desc_act": "yes" if d.desc_act else "no",
        "model_type": ck.arch.model_type or "", "architecture": (ck.arch.architectures or ("",))[0],
        "expert_dtype": declared.expert_dtype if declared else "",
        "bits": d.bits, "group_size": d.group_size, "sym": d.sym, "desc_act_key": d.desc_act_key,
        "zero_point": d.zero_point, "checkpoint_format": d.checkpoint_format,
    }


def resolve_load(ck: CheckpointInfo, gpu: GpuSpec, rules: RuleFile, options: InstallOptions) -> ModelLoad | None:
    """The engine's view of the checkpoint's quantization (None: the rule file does not model the stage)."""
    cl = rules.config_loading
    if cl is None or _declared(ck) is None:
        return None
    facts = load_facts(ck, cl.files)
    ctx = Context(sm=gpu.sm, gpu_name=gpu.name, rules=rules, options=options, tp=1,
                  layer=LayerFacts(layer_class="model", scheme="", load=tuple(facts.items())))
    file = facts["file"] or None
    declared = facts["quant_method"] or facts["quant_algo"] or facts["flat_quant_algo"] or None
    steps = [f"{rules.display_name} reads the quantization config from {file} ({cl.files_source})" if file
             else f"{rules.display_name} finds no quantization config ({cl.files_source})"]
    step = next((s for s in cl.steps if gates_pass(s.when, ctx) is None), None)
    if step is None:      # the data ends with a catch-all step; without one nothing is resolved
        return ModelLoad(file, declared, None, None, tuple(steps), "loads")
    steps.append(f"{_fill(step.note, facts)} ({step.source})")
    if step.refuse is not None:
        first = _start_refusal(rules, ctx) if step.at_load else None
        if first is not None:
            steps.append(f"but {rules.display_name} stops at start-up before the loader gets there ({first.source})")
        return _refused(file, declared, None, steps, first or step.refuse, facts)
    method = cl.aliases.get(facts["quant_method"], facts["quant_method"]) if step.method == "{declared}" \
        else step.method
    if not method:
        if ck.label in _UNQUANTIZED:
            return ModelLoad(file, declared, None, None, tuple(steps), "loads")
        u = cl.unquantized
        return ModelLoad(file, declared, None, None, tuple(steps), "unquantized", error=_fill(u.text, facts),
                         meaning=_meaning(u, facts), source=u.source)
    spec = cl.methods.get(method)
    if spec is None:
        return _refused(file, declared, method, steps, cl.unknown_method, {**facts, "method": method})
    steps.append(f"method {method}: {spec.config_class}, minimum compute capability {spec.min_capability / 10:.1f} "
                 f"({spec.source})")
    values = {**facts, "method": method, "min": str(spec.min_capability), "sm": str(gpu.sm),
              "config_class": spec.config_class}
    if gpu.sm < spec.min_capability:
        return _refused(file, declared, method, steps, cl.min_capability, values, spec.config_class)
    dtype = _act16(gpu, rules)
    if dtype not in spec.act_dtypes:
        values.update(dtype=_TORCH[dtype], dtypes="[" + ", ".join(_TORCH[d] for d in spec.act_dtypes) + "]")
        return _refused(file, declared, method, steps, cl.act_dtype, values, spec.config_class)
    return ModelLoad(file, declared, method, spec.config_class, tuple(steps), "loads")


def engine_kv_cache(load: ModelLoad | None, ck: CheckpointInfo, rules: RuleFile) -> str | None:
    """The KV-cache quantization the engine finds declared: only in the file it reads, only for the methods
    whose declaration it honours (rules.kv_from_checkpoint; vLLM resolves --kv-cache-dtype auto from a
    ModelOpt quant config, vllm/utils/torch_utils.py:443-516@0.33.0)."""
    if load is None or rules.config_loading is None:
        return ck.kv_cache_quant
    if load.outcome != "loads" or not load.method or not load.method.startswith(tuple(rules.kv_from_checkpoint)):
        return None
    declared = _declared(ck)
    decl = declared.in_file(load.config_file or "") if declared else None
    kv = decl.kv_cache if decl else ""
    return kv if kv in ("fp8", "nvfp4") else None


def layer_load_facts(load: ModelLoad | None, ck: CheckpointInfo, rules: RuleFile) -> tuple[tuple[str, str], ...]:
    """What per-layer rules may gate on: the stage's facts plus the method the engine resolved."""
    if load is None or rules.config_loading is None:
        return ()
    facts = load_facts(ck, rules.config_loading.files)
    facts["method"] = load.method or ""
    return tuple(facts.items())


def overrides_layers(load: ModelLoad | None, ck: CheckpointInfo) -> bool:
    """Whether the stage's outcome is the answer for every layer: a refusal, or quantized weights built
    unquantized. A format no engine method reads (EXL2, MLX, GGUF, ...) keeps its layers' own rules, which
    name the format and the engine that does load it."""
    if load is None or load.runs:
        return False
    return not (load.outcome == "unquantized" and ck.label in FOREIGN_LABELS.values())


def engine_view(facts: LayerFacts) -> LayerFacts:
    """A layer as an engine that found no quantization method builds it: 16-bit, unquantized."""
    if facts.layer_class == "attention_kv":
        return facts
    return replace(facts, scheme="BF16", weight_format="bf16", weight_granularity="none", group_size=None,
                   block=None, symmetric=None, act_order=False, act_format="none", act_granularity=None,
                   act_dynamic=None)


def model_level(d: LayerDecision, load: ModelLoad, engine: str) -> LayerDecision:
    """A decision under a model-level outcome: refused (no layer is built: nothing runs, nothing was
    chosen) or built unquantized (vLLM builds this kernel, then the quantized weights do not load)."""
    if load.refused:
        # what the layer's own rule says is kept only when it is a refusal too (e.g. a format the engine does
        # not load); a kernel choice for a layer that is never built is not
        own = d.reasons if not d.runs else ()
        return replace(d, kernel=None, mma="none", dequant="none", runs=False, error=load.error, rejected=(),
                       m_ranges=(), effective_scheme=d.checkpoint_scheme,
                       reasons=(f"{engine} refuses the whole model while reading its config, before any layer "
                                f"is built: {load.error}", load.meaning, f"source: {load.source}", *own))
    return replace(d, runs=False, error=load.error,
                   reasons=(f"{engine} builds this layer unquantized: {load.error}", *d.reasons,
                            load.meaning, f"source: {load.source}"))


def load_summary(load: ModelLoad, engine: str, gpu_name: str) -> str:
    if load.refused:
        what = (f"quantization method {load.method} ({load.config_class})" if load.config_class
                else f"quantization method {load.method}" if load.method else "its quantization config")
        return (f"{engine} does not start this model on the {gpu_name}: it refuses {what} while reading the config, "
                f"before any layer is built: \u201c{load.error}\u201d")
    return (f"{engine} does not recognise this checkpoint's quantization config ({load.config_file}): it builds "
            "every layer unquantized (16-bit), so the quantized weights fail to load or load wrong.")


_TORCH = {"bf16": "torch.bfloat16", "fp16": "torch.float16", "fp32": "torch.float32"}


def _act16(gpu: GpuSpec, rules: RuleFile) -> str:
    if rules.activation_dtype in ("bf16", "fp16"):
        return rules.activation_dtype
    return "fp16" if gpu.sm < 80 else "bf16"


def _fill(text: str, values: dict[str, str]) -> str:
    for k, v in values.items():
        text = text.replace("{" + k + "}", v)
    return text


def _start_refusal(rules: RuleFile, ctx: Context) -> Failure | None:
    """The global refusal (checked at engine start-up) that holds here, if any."""
    return next((r for r in rules.global_refusals if gates_pass(r.unless, ctx) is not None), None)


def _meaning(f: Failure, values: dict[str, str]) -> str:
    m = _fill(f.meaning, values)
    return f"{m} Remedy: {_fill(f.remedy, values)}" if f.remedy else m


def _refused(file, declared, method, steps, f: Failure, values: dict[str, str], config_class=None) -> ModelLoad:
    return ModelLoad(file, declared, method, config_class, tuple(steps), "refused", error=_fill(f.text, values),
                     meaning=_meaning(f, values), source=f.source)


# A checkpoint built in code (tests, synthesised demos) carries no raw declaration: rebuild the one its
# producer writes, so the stage still runs. Producers the advisor cannot map skip the stage.
_MODELOPT_ALGOS = {"W8A8-FP8": "FP8", "W4A4-NVFP4": "NVFP4", "W4A16-NVFP4": "NVFP4", "MIXED": "MIXED_PRECISION"}
_PLAIN_METHODS = ("fp8", "gptq", "awq", "mxfp4", "bitsandbytes", "w8a8_int8", "compressed-tensors")


def declared_from_info(ck: CheckpointInfo) -> DeclaredQuant | None:
    p = ck.producer
    desc_act = any(bool(m.weight.act_order) and m.weight.granularity == "group" for m in ck.modules)
    if p == "none":
        return DeclaredQuant()
    if p == "modelopt":
        algo = (ck.quant_method or "").upper()
        algo = algo if algo in ("FP8", "NVFP4", "MIXED_PRECISION", "FP8_PB_WO", "W4A16_NVFP4") \
            else _MODELOPT_ALGOS.get(ck.label, "")
        group = next((m.weight.group_size for m in ck.modules if m.weight.format == "nvfp4" and m.weight.group_size),
                     None)
        return DeclaredQuant((QuantDeclaration("hf_quant_config.json", producer="modelopt", quant_algo=algo,
                                               kv_cache=ck.kv_cache_quant or "",
                                               group_size=str(group) if group else ""),))
    if p in _PLAIN_METHODS:
        method = (ck.quant_method or p).lower() if p in ("gptq", "awq") else p
        fmt = ck.quant_method or "" if p == "compressed-tensors" else ""
        keys: _GptqKeys = _gptq_keys(ck) if p in ("gptq", "awq") else {}
        return DeclaredQuant((QuantDeclaration("config.json", quant_method=method, format=fmt, desc_act=desc_act,
                                               kv_cache=ck.kv_cache_quant or "", **keys),))
    return None


class _GptqKeys(TypedDict, total=False):
    """The QuantDeclaration fields _gptq_keys may set."""

    bits: str
    group_size: str
    desc_act_key: str
    sym: str
    zero_point: str


def _gptq_keys(ck: CheckpointInfo) -> _GptqKeys:
    """The GPTQ/AWQ config keys a quantized module's facts imply (bits, group_size, sym, desc_act, zero_point)."""
    w = next((m.weight for m in ck.modules
              if m.weight.bits in (4, 8) and m.weight.format in ("int4", "uint4", "int8", "uint8")), None)
    if w is None:
        return {}
    yes = lambda flag: "yes" if flag else "no"   # noqa: E731
    group = w.group_size if w.granularity == "group" and w.group_size else -1
    keys: _GptqKeys = {"bits": str(w.bits), "group_size": str(group), "desc_act_key": yes(w.act_order)}
    if w.symmetric is not None:
        keys["sym"] = yes(w.symmetric)
        keys["zero_point"] = yes(not w.symmetric)
    return keys
