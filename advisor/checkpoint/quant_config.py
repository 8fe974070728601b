"""What a checkpoint's quantization config declares, per module.

One :class:`QuantPlan` per checkpoint answers ``spec_for(name, role)``: the declared weight and
activation format of a module, or None when the module is left unquantized (ignored, excluded,
outside the quantized set). Sources and rules: shared/research/checkpoint-formats.md §2-§5.

For ModelOpt the precision comes from ``quant_algo`` / ``quantized_layers``, never from the
``config_groups`` it also writes: real exports contradict themselves there (§2.3, §6 E5b).
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass, field
from functools import lru_cache

from advisor.checkpoint.model import ActQuant, WeightQuant
from advisor.checkpoint.roles import LINEAR_ROLES
from advisor.errors import BadInput

# Roles a producer quantizes when its config only says "Linear" layers.
_DECODER_LINEAR = LINEAR_ROLES - {"router", "lm_head"}


@dataclass(frozen=True)
class Spec:
    weight: WeightQuant
    act: ActQuant
    source: str                 # where the declaration came from, e.g. "quant_algo NVFP4", "config_groups.group_1"


@dataclass
class QuantPlan:
    producer: str                                   # modelopt | compressed-tensors | fp8 | gptq | awq | bitsandbytes | mxfp4 | none | unknown
    quant_method: str | None = None
    raw: dict | None = None
    kv_cache: str | None = None
    notes: list[tuple[str, str]] = field(default_factory=list)   # (code, message) for doctor findings
    kv_cache_raw: object = None                     # the KV declaration as written (string or object)
    format_note: str = ""                           # a format the kernel rules do not serve, in words
    kv_detail: str = ""                             # the KV-cache quantization in words
    declared_layers: tuple[str, ...] = ()           # module names the config quantizes one by one (quantized_layers)
    _resolver: object = None

    def spec_for(self, name: str, role: str) -> Spec | None:
        if self._resolver is None:
            return None
        return self._resolver(name, role)


def _str_list(v) -> list[str]:
    """A list of strings from a config value that should be one (anything else counts as empty)."""
    return [x for x in v if isinstance(x, str)] if isinstance(v, list) else []


def _num(v, default=None):
    return v if isinstance(v, int) and not isinstance(v, bool) else default


# Doctor codes of the notes below (doctor.py gives them their severity).
INVALID = "invalid-quant-config"        # a value no producer writes: the advisor names what it assumed
CONFLICT = "quant-config-conflict"      # two quantization config files disagree


class _Where:
    """Where a config dict lives (file and key path), to name a bad value in a finding."""

    def __init__(self, notes: list, file: str, key: str):
        self.notes, self.file, self.key = notes, file, key

    def sub(self, key: str) -> "_Where":
        return _Where(self.notes, self.file, f"{self.key}.{key}" if self.key else key)

    def bad(self, key: str, value, why: str, assumed: str) -> None:
        path = f"{self.key}.{key}" if self.key else key
        self.notes.append((INVALID, f"{self.file}: {path} is {_show(value)}: {why}; {assumed}"))


def _show(v) -> str:
    if isinstance(v, float) and v != v:
        return "NaN"
    text = repr(v) if isinstance(v, str) else (type(v).__name__ if isinstance(v, (dict, list)) and len(str(v)) > 40
                                                else str(v).replace("None", "null"))
    return text


def _group_size(d: dict, where: _Where | None, assumed: str, *, channel_ok: bool = False) -> int | None:
    """A declared group size: a positive int (or -1 = per channel where the format allows it).
    Absent/null -> None; anything else is reported and treated as absent."""
    v = d.get("group_size")
    if v is None:
        return None
    if _num(v) is not None and (v > 0 or (channel_ok and v == -1)):
        return v
    if where is not None:
        where.bad("group_size", v, "not a valid group size", assumed)
    return None


# ------------------------------------------------------------------ ModelOpt

_FP8_T = WeightQuant("fp8_e4m3", 8, "tensor")
_FP8_STATIC = ActQuant("fp8_e4m3", dynamic=False, granularity="tensor")


def _nvfp4_w(gs: int = 16) -> WeightQuant:
    return WeightQuant("nvfp4", 4, "nvfp4", group_size=gs or 16, symmetric=True, packing="uint8-2-per-byte")


_NVFP4_ACT = ActQuant("nvfp4", dynamic=True, granularity="group", group_size=16)
_MXFP4_W = WeightQuant("mxfp4", 4, "mxfp4", group_size=32, symmetric=True, packing="uint8-2-per-byte")
_MXFP4_ACT = ActQuant("mxfp4", dynamic=True, granularity="group", group_size=32)


_NVFP4_ALGOS = ("NVFP4", "NVFP4_AWQ", "NVFP4_SVD", "NVFP4_STATIC", "W4A16_NVFP4", "W4A8_NVFP4_FP8")
_INT4_ALGOS = ("W4A16_AWQ", "INT4_AWQ", "W4A8_AWQ")


def modelopt_algo_spec(algo: str, entry: dict, where: _Where | None = None) -> tuple[WeightQuant, ActQuant] | None:
    """ModelOpt quant_algo -> formats (quant_utils.py:704-768 and the §5 mapping)."""
    a = algo.upper()
    if a in _NVFP4_ALGOS:
        assumed = "the advisor assumed 16 as ModelOpt writes"
    elif a in _INT4_ALGOS:
        assumed = "the advisor assumed 128, ModelOpt's INT4 AWQ default"
    else:
        assumed = f"ignored ({a or 'this algorithm'} has no group size)"
    gs = _group_size(entry, where, assumed)
    if a == "FP8":
        return _FP8_T, _FP8_STATIC
    if a == "FP8_PER_CHANNEL_PER_TOKEN":
        return WeightQuant("fp8_e4m3", 8, "channel"), ActQuant("fp8_e4m3", dynamic=True, granularity="token")
    if a in ("FP8_PB_WO", "FP8_PB_REAL"):
        return WeightQuant("fp8_e4m3", 8, "block", block=(128, 128)), ActQuant()
    if a == "MXFP8":
        return (WeightQuant("fp8_e4m3", 8, "group", group_size=32),
                ActQuant("fp8_e4m3", dynamic=True, granularity="group", group_size=32))
    if a in ("W8A16", "INT8_WO"):
        return WeightQuant("int8", 8, "channel", symmetric=True), ActQuant()
    if a in ("W8A8_SQ_PER_CHANNEL", "INT8", "INT8_SQ", "W8A8"):
        return WeightQuant("int8", 8, "channel", symmetric=True), ActQuant("int8", dynamic=False, granularity="tensor")
    if a in ("NVFP4", "NVFP4_AWQ", "NVFP4_SVD", "NVFP4_STATIC"):
        return _nvfp4_w(gs or 16), _NVFP4_ACT
    if a == "W4A16_NVFP4":
        return _nvfp4_w(gs or 16), ActQuant()
    if a == "W4A8_NVFP4_FP8":
        return _nvfp4_w(gs or 16), _FP8_STATIC
    if a == "MXFP4":
        return _MXFP4_W, _MXFP4_ACT
    if a == "W4A8_MXFP4_FP8":
        return _MXFP4_W, _FP8_STATIC
    if a in ("W4A16_AWQ", "INT4_AWQ"):
        return (WeightQuant("int4", 4, "group", group_size=gs or 128, symmetric=not entry.get("has_zero_point"),
                            packing="uint8-2-per-byte-dim0"), ActQuant())
    if a == "W4A8_AWQ":
        return (WeightQuant("int4", 4, "group", group_size=gs or 128, symmetric=not entry.get("has_zero_point"),
                            packing="uint8-2-per-byte-dim0"), _FP8_STATIC)
    return None


@lru_cache(maxsize=4096)
def _glob(pattern: str) -> re.Pattern:
    return re.compile(fnmatch.translate(pattern))


def _excluder(patterns):
    """ModelOpt exclude_modules / ignore: is a module name excluded (fnmatch, or the name or a parent of it;
    vllm modelopt.py is_layer_excluded). Prepared once per list, asked per module (a MoE checkpoint lists
    one pattern per layer): a pattern without a wildcard only matches itself, so only wildcards need a regex."""
    strs = [p for p in patterns if isinstance(p, str)]
    exact = frozenset(strs)
    prefixes = tuple(p + "." for p in strs)
    globs = tuple(_glob(p) for p in strs if any(c in p for c in "*?["))

    def excluded(name: str) -> bool:
        return name in exact or name.startswith(prefixes) or any(g.match(name) for g in globs)
    return excluded


def _modelopt_plan(qcfg: dict, hf_quant: dict | None, notes: list, qc_key: str) -> QuantPlan:
    if hf_quant is not None:
        nested = isinstance(hf_quant.get("quantization"), dict)
        q = hf_quant["quantization"] if nested else hf_quant
        where = _Where(notes, "hf_quant_config.json", "quantization" if nested else "")
        producer_version = (hf_quant.get("producer") or {}).get("version") if isinstance(hf_quant.get("producer"), dict) else None
    else:
        q = qcfg
        where = _Where(notes, "config.json", qc_key)
        producer_version = (qcfg.get("producer") or {}).get("version") if isinstance(qcfg.get("producer"), dict) else None
    algo = str(q.get("quant_algo") or qcfg.get("quant_algo") or "").upper()
    excludes = _str_list(q.get("exclude_modules") or qcfg.get("ignore") or qcfg.get("exclude_modules"))
    is_excluded = _excluder(excludes)
    kv = q.get("kv_cache_quant_algo")
    if kv is None:
        kv = qcfg.get("kv_cache_quant_algo")
    if kv is None and isinstance(qcfg.get("kv_cache_scheme"), (dict, str)):
        kv = qcfg["kv_cache_scheme"]
    plan = QuantPlan(producer="modelopt", quant_method=algo or "modelopt", raw=hf_quant or qcfg,
                     kv_cache_raw=kv, notes=notes)
    if producer_version:
        plan.notes.append(("producer", f"modelopt {producer_version}"))
    layers = q.get("quantized_layers") or qcfg.get("quantized_layers")
    layers = layers if isinstance(layers, dict) else None
    plan.declared_layers = tuple(layers or ())
    if algo == "MIXED_PRECISION" or layers:
        table: dict[str, tuple[WeightQuant, ActQuant, str]] = {}
        for lname, entry in (layers or {}).items():
            if not isinstance(entry, dict):
                continue
            sub = str(entry.get("quant_algo") or "")
            spec = modelopt_algo_spec(sub, entry, where.sub(f"quantized_layers[{lname!r}]"))
            if spec is None:
                plan.notes.append(("unknown-quant-algo", f"quantized_layers[{lname!r}]: unknown quant_algo {sub!r}"))
                continue
            table[lname] = (spec[0], spec[1], sub.upper())
        _check_modelopt_groups(qcfg, table, plan)

        def resolve(name: str, role: str) -> Spec | None:
            hit = table.get(name)
            if hit is None:
                parts = name.split(".")
                for i in range(len(parts) - 1, 0, -1):   # container keys, e.g. "...mlp.experts"
                    hit = table.get(".".join(parts[:i]))
                    if hit is not None:
                        break
            if hit is None or is_excluded(name):
                return None
            return Spec(hit[0], hit[1], f"quantized_layers {hit[2]}")

        plan._resolver = resolve
        return plan
    spec = modelopt_algo_spec(algo, q if isinstance(q, dict) else {}, where)
    if spec is None:
        unknown = _unknown_plan(q if isinstance(q, dict) else {}, algo or None,
                                f"ModelOpt quant_algo {algo or None!r}")
        plan.producer, plan._resolver, plan.format_note = "unknown", unknown._resolver, unknown.format_note
        plan.notes.append(("unknown-quant-algo", f"ModelOpt quant_algo {algo or None!r} is not known: the linear "
                                                 "layers are UNKNOWN; sizes assume 16-bit weights, an upper bound"))
        return plan

    uniform = Spec(spec[0], spec[1], f"quant_algo {algo}")      # frozen: one for every module

    def resolve_uniform(name: str, role: str) -> Spec | None:
        if role not in LINEAR_ROLES and role not in ("mtp", "vision", "other"):
            return None
        if is_excluded(name):
            return None
        return uniform

    plan._resolver = resolve_uniform
    return plan


def _check_modelopt_groups(qcfg: dict, table: dict, plan: QuantPlan) -> None:
    """Flag config_groups that disagree with quantized_layers (nvidia/Qwen3.6-35B-A3B-NVFP4, §6 E5b)."""
    groups = qcfg.get("config_groups")
    if not isinstance(groups, dict):
        return
    for gname, g in groups.items():
        if not isinstance(g, dict):
            continue
        ia = g.get("input_activations")
        declared_a4 = isinstance(ia, dict) and ia.get("num_bits") == 4
        targets = g.get("targets")
        for t in targets if isinstance(targets, list) else []:
            hit = table.get(t) if isinstance(t, str) else None
            if hit and declared_a4 and hit[1].format == "none":
                plan.notes.append((
                    "modelopt-config-groups-contradict",
                    f"config.json {gname} declares 4-bit activations for {t} but quantized_layers says {hit[2]};"
                    " quantized_layers is used"))
                return


_KV_DTYPES = {  # spelling -> (dtype name, words); ModelOpt kv_cache_quant_algo (quant_utils.py:438-462),
    # compressed-tensors kv_cache_scheme, HF fp8 / Quark spellings
    "fp8": ("fp8", "FP8 E4M3"), "fp8_e4m3": ("fp8", "FP8 E4M3"), "float8_e4m3fn": ("fp8", "FP8 E4M3"),
    "fp8_e5m2": ("fp8", "FP8 E5M2"), "static": ("fp8", "FP8 E4M3"),
    "int8": ("int8", "INT8"), "nvfp4": ("nvfp4", "NVFP4 (E2M1 + E4M3 scale per 16)"),
    "nvfp4_affine": ("nvfp4", "NVFP4 affine (E2M1 + E4M3 scale per 16, with a bias)"),
}


def kv_words(kv) -> tuple[str | None, str]:
    """(dtype name, words) of a KV-cache declaration in any producer's spelling."""
    if kv is None:
        return None, ""
    if isinstance(kv, str):
        hit = _KV_DTYPES.get(kv.strip().lower())
        if hit is None:
            return kv.lower(), f"{kv} (a spelling the advisor does not know)"
        spelled = f" (declared as {kv!r})" if kv.strip().lower() == "static" else ""
        return hit[0], f"{hit[1]}, static per-tensor scales (k_scale / v_scale){spelled}"
    if isinstance(kv, dict):
        name = _kv_name(kv)
        bits, typ = kv.get("num_bits"), kv.get("type")
        what = {("fp8", "float"): "FP8 E4M3", ("int8", "int"): "INT8"}.get((name, typ), f"{typ} {bits}-bit")
        if name == "nvfp4":
            what = "NVFP4 (E2M1 + E4M3 scale per 16)"
        gran = {"tensor": "per-tensor", "channel": "per-channel", "attn_head": "per-head", "head": "per-head",
                "group": "per-group", "token": "per-token"}.get(str(kv.get("strategy") or "tensor"), "per-tensor")
        mode = "dynamic" if kv.get("dynamic") is True else "static"
        return name, f"{what}, {mode} {gran} scales"
    return str(kv), str(kv)


def _kv_name(kv) -> str | None:
    if kv is None:
        return None
    if isinstance(kv, str):
        return kv.lower()
    if isinstance(kv, dict):
        bits, typ = kv.get("num_bits"), kv.get("type")
        if bits == 8:
            return "int8" if typ == "int" else "fp8"
        if bits == 4:
            return "nvfp4" if typ == "float" else "int4"
        return f"{typ}{bits}"
    return str(kv)


# ------------------------------------------------------------------ compressed-tensors

def _ct_bits(args: dict, where: _Where | None) -> int:
    """num_bits of a compressed-tensors QuantizationArgs (1..16, default 8 as CT's own default)."""
    v = args.get("num_bits", 8)
    if _num(v, 0) in range(1, 17):
        return v
    # a 4-bit float format is the only one with a 16/32 group: keep what the rest of the entry says
    guess = 4 if args.get("type") == "float" and args.get("group_size") in (16, 32) else 8
    if where is not None:
        where.bad("num_bits", v, "not a valid bit width",
                  f"the advisor assumed {guess} from type {args.get('type')!r} and group_size {args.get('group_size')!r}")
    return guess


def ct_weight(args: dict | None, group_format: str | None = None, where: _Where | None = None) -> WeightQuant:
    if not isinstance(args, dict):
        return WeightQuant()
    bits = _ct_bits(args, where)
    typ = args.get("type") if args.get("type") in ("int", "float") else "int"
    strategy = args.get("strategy")
    fp4 = typ == "float" and bits == 4
    gs = _group_size(args, where, "the advisor assumed 16 as the NVFP4 format fixes" if fp4 else
                     "treated as not given (granularity from strategy)", channel_ok=True)
    sym = args.get("symmetric", True)
    block = args.get("block_structure")
    scale_dtype = str(args.get("scale_dtype") or "")
    if typ == "float" and bits == 4:
        if gs == 32 or "uint8" in scale_dtype or (group_format or "").startswith("mxfp4"):
            return WeightQuant("mxfp4", 4, "mxfp4", group_size=32, symmetric=True, packing="uint8-2-per-byte")
        return WeightQuant("nvfp4", 4, "nvfp4", group_size=gs or 16, symmetric=True, packing="uint8-2-per-byte")
    if typ == "float":
        fmt = "fp8_e4m3" if bits == 8 else f"fp{bits}"
    else:
        fmt = f"int{bits}" if sym is not False else f"uint{bits}"
    gran = _granularity(strategy, gs, block)
    packing = None
    if typ == "int" and (group_format == "pack-quantized" or (group_format is None and bits < 8)):
        packing = f"int32-{32 // bits}-per-word" if bits in (2, 4, 8) else "int32-packed"
    return WeightQuant(fmt, bits, gran, group_size=gs if gran == "group" else None,
                       block=tuple(block) if gran == "block" and isinstance(block, list) else None,
                       symmetric=bool(sym) if sym is not None else None, packing=packing)


def _granularity(strategy, gs, block) -> str:
    if strategy in ("tensor", "channel", "group", "block", "token"):
        return strategy
    if strategy == "tensor_group":
        return "group"
    if block:
        return "block"
    if gs is None:
        return "tensor"
    return "channel" if gs == -1 else "group"


def ct_act(args: dict | None, where: _Where | None = None) -> ActQuant:
    if not isinstance(args, dict):
        return ActQuant()
    bits = _ct_bits(args, where)
    typ = args.get("type") if args.get("type") in ("int", "float") else "int"
    gs = _group_size(args, where, "the advisor assumed 16 as the NVFP4 format fixes" if typ == "float" and bits == 4
                     else "treated as not given (granularity from strategy)", channel_ok=True)
    dyn = args.get("dynamic")
    dynamic = dyn is True or dyn == "local"
    strategy = args.get("strategy")
    if typ == "float" and bits == 4:
        fmt = "mxfp4" if gs == 32 else "nvfp4"
        return ActQuant(fmt, dynamic=dynamic, granularity="group", group_size=gs or (32 if fmt == "mxfp4" else 16))
    fmt = "fp8_e4m3" if typ == "float" and bits == 8 else (f"int{bits}" if typ == "int" else f"fp{bits}")
    gran = {"token": "token", "tensor": "tensor", "group": "group", "tensor_group": "group"}.get(
        strategy, "tensor" if gs is None else "group")
    return ActQuant(fmt, dynamic=dynamic, granularity=gran, group_size=gs if gran == "group" else None)


def _ct_match(name: str, role: str, target: str) -> bool:
    """compressed-tensors targets: "re:<regex>" (re.match on the module name), an exact module name,
    or a class name ("Linear", "Embedding")."""
    if target.startswith("re:"):
        try:
            return re.match(target[3:], name) is not None
        except re.error:
            return False
    if target == name:
        return True
    if "." not in target and target[:1].isupper():
        if target.endswith("Linear") or target in ("FusedMoE",):
            return role in LINEAR_ROLES or role in ("mtp", "vision", "other")
        if target.endswith("Embedding"):
            return role == "embed"
        if target.endswith("Experts") or target.endswith("MoE"):
            return role == "expert"
    return False


def _ct_plan(qcfg: dict, notes: list, qc_key: str) -> QuantPlan:
    groups = qcfg.get("config_groups")
    where = _Where(notes, "config.json", qc_key)
    if groups is None:
        groups = {}
    if not isinstance(groups, dict):
        # nothing to read the module formats from: the whole declaration is void
        raise BadInput(f"{qc_key}.config_groups is {_show(groups)}, not a mapping of group name to scheme",
                       path="config.json")
    ignore = _str_list(qcfg.get("ignore"))
    top_format = qcfg.get("format")
    table: list[tuple[str, list[str], WeightQuant, ActQuant]] = []
    for gname, g in groups.items():
        gw = where.sub(f"config_groups.{gname}")
        if not isinstance(g, dict):
            raise BadInput(f"{gw.key} is {_show(g)}, not a scheme object (weights, input_activations, targets)",
                           path="config.json")
        fmt = g.get("format") or (top_format if top_format != "mixed-precision" else None)
        targets = _str_list(g.get("targets"))
        w_args, a_args = g.get("weights"), g.get("input_activations")
        if not isinstance(w_args, dict):
            what = ("its targets are taken as 16-bit weights" if isinstance(a_args, dict) else
                    "the group quantizes nothing; its targets are taken as 16-bit")
            gw.bad("weights", w_args, "no weight quantization arguments", what)
        if a_args is not None and not isinstance(a_args, dict):
            gw.bad("input_activations", a_args, "not an object or null", "taken as unquantized activations")
        table.append((gname, targets, ct_weight(w_args, fmt, gw.sub("weights")),
                      ct_act(a_args, gw.sub("input_activations"))))
    plan = QuantPlan(producer="compressed-tensors", quant_method=str(top_format or "compressed-tensors"), raw=qcfg,
                     kv_cache_raw=qcfg.get("kv_cache_scheme"), notes=notes)

    def resolve(name: str, role: str) -> Spec | None:
        if any(_ct_match(name, role, i) for i in ignore):
            return None
        # Later groups win on overlap? CT resolves the most specific match; a name or regex target
        # beats a class target, which is how presets with overrides are written.
        best = None
        for gname, targets, w, a in table:
            for t in targets:
                if _ct_match(name, role, t):
                    specific = t.startswith("re:") or "." in t
                    if best is None or (specific and not best[0]):
                        best = (specific, Spec(w, a, f"config_groups.{gname}"))
        return best[1] if best else None

    plan._resolver = resolve
    return plan


# ------------------------------------------------------------------ other methods

def _not_convert(name: str, patterns) -> bool:
    """transformers modules_to_not_convert: substring of the module name, or a glob with '*'."""
    for p in patterns or ():
        if not isinstance(p, str) or not p:
            continue
        if "*" in p:
            if _glob(p).match(name) or _glob(p + ".*").match(name):
                return True
        elif p in name or name == p.rstrip("."):
            return True
    return False


def _fp8_plan(qcfg: dict, notes: list, qc_key: str) -> QuantPlan:
    block = qcfg.get("weight_block_size")
    scheme = str(qcfg.get("activation_scheme") or "dynamic")
    valid_block = isinstance(block, list) and len(block) == 2 and all(_num(b, 0) > 0 for b in block)
    if block is not None and not valid_block:
        _Where(notes, "config.json", qc_key).bad(
            "weight_block_size", block, "not a pair of positive block sizes [rows, cols]",
            "the advisor assumed per-tensor FP8 scales (the tensor headers show the real ones)")
    if valid_block:
        w = WeightQuant("fp8_e4m3", 8, "block", block=(int(block[0]), int(block[1])), symmetric=True)
        a = ActQuant("fp8_e4m3", dynamic=scheme != "static",
                     granularity="group" if scheme != "static" else "tensor",
                     group_size=int(block[1]) if scheme != "static" else None)
    else:
        w = WeightQuant("fp8_e4m3", 8, "tensor", symmetric=True)
        a = ActQuant("fp8_e4m3", dynamic=scheme != "static", granularity="token" if scheme != "static" else "tensor")
    skip = _str_list(qcfg.get("modules_to_not_convert"))
    plan = QuantPlan(producer="fp8", quant_method="fp8", raw=qcfg, kv_cache_raw=qcfg.get("kv_cache_scheme"),
                     notes=notes)

    def resolve(name: str, role: str) -> Spec | None:
        if role not in _DECODER_LINEAR | {"mtp", "other"} or _not_convert(name, skip):
            return None
        return Spec(w, a, "quant_method fp8")

    plan._resolver = resolve
    return plan


def _gptq_awq_plan(qcfg: dict, method: str, notes: list, where: tuple[str, str]) -> QuantPlan:
    w_at = _Where(notes, *where)
    bkey = "bits" if "bits" in qcfg else "w_bit"
    bits = qcfg.get(bkey, 4)
    if _num(bits, 0) not in range(1, 9):
        w_at.bad(bkey, bits, "not a bit width of 1..8", "the advisor assumed 4")
        bits = 4
    gkey = "group_size" if "group_size" in qcfg else "q_group_size"
    gs = qcfg.get(gkey, 128)
    if _num(gs) is None or not (gs > 0 or gs == -1):
        # -1 means per output channel (GPTQ/AWQ); 0 and other negatives are nothing a quantizer writes
        w_at.bad(gkey, gs, "not a valid group size (a positive size, or -1 for per channel)",
                 "the advisor assumed 128")
        gs = 128
    if method.startswith("awq"):
        sym = not qcfg.get("zero_point", True)
        packing = "int32-8-per-word-awq-order"
    else:
        sym = bool(qcfg.get("sym", True))
        packing = f"int32-{32 // bits}-per-word" if bits in (2, 4, 8) else "int32-packed"
    fmt = f"int{bits}" if sym else f"uint{bits}"
    w = WeightQuant(fmt, bits, "channel" if gs in (-1, 0) else "group", group_size=None if gs in (-1, 0) else gs,
                    symmetric=sym, packing=packing,
                    act_order=bool(qcfg.get("desc_act")) if not method.startswith("awq") else None)
    skip = _str_list(qcfg.get("modules_to_not_convert"))
    inside = qcfg.get("modules_in_block_to_quantize")
    flat_inside = None
    if isinstance(inside, list):
        flat_inside = [x for grp in inside for x in (grp if isinstance(grp, list) else [grp]) if isinstance(x, str)]
    plan = QuantPlan(producer="gptq" if method.startswith("gptq") else "awq", quant_method=method, raw=qcfg,
                     notes=notes)

    def resolve(name: str, role: str) -> Spec | None:
        # GPTQ/AWQ quantize the Linear layers inside decoder blocks; routers and lm_head stay 16-bit.
        if role not in _DECODER_LINEAR or _not_convert(name, skip):
            return None
        if flat_inside is not None and not any(name.endswith("." + x) or ("." + x + ".") in name for x in flat_inside):
            return None
        return Spec(w, ActQuant(), f"quant_method {method}")

    plan._resolver = resolve
    return plan


def _bnb_plan(qcfg: dict) -> QuantPlan:
    skip = _str_list(qcfg.get("llm_int8_skip_modules")) + ["lm_head"]
    if qcfg.get("load_in_8bit") and not qcfg.get("load_in_4bit"):
        # LLM.int8 multiplies int8 x int8 (activations quantized per row, outliers kept in fp16).
        w, a = WeightQuant("int8", 8, "channel", symmetric=True), ActQuant("int8", dynamic=True, granularity="token")
    else:
        qt = str(qcfg.get("bnb_4bit_quant_type") or "fp4")
        w, a = WeightQuant("nf4" if qt == "nf4" else "fp4", 4, "group", group_size=64, packing="uint8-2-per-byte"), ActQuant()
    plan = QuantPlan(producer="bitsandbytes", quant_method="bitsandbytes", raw=qcfg)

    def resolve(name: str, role: str) -> Spec | None:
        if role not in LINEAR_ROLES | {"other", "mtp"} or _not_convert(name, skip):
            return None
        return Spec(w, a, "quant_method bitsandbytes")

    plan._resolver = resolve
    return plan


def _mxfp4_plan(qcfg: dict) -> QuantPlan:
    skip = _str_list(qcfg.get("modules_to_not_convert"))
    plan = QuantPlan(producer="mxfp4", quant_method="mxfp4", raw=qcfg)

    def resolve(name: str, role: str) -> Spec | None:
        # gpt-oss: only the MoE experts are MXFP4 (transformers integrations/mxfp4.py).
        if role != "expert" or _not_convert(name, skip):
            return None
        return Spec(_MXFP4_W, ActQuant(), "quant_method mxfp4")

    plan._resolver = resolve
    return plan


def _w8a8_int8_plan(qcfg: dict) -> QuantPlan:
    """SGLang's own `w8a8_int8` format: INT8 weights per output channel (symmetric, static) and INT8
    activations per token (dynamic) for every linear and MoE layer not in `ignore`
    (sglang/srt/layers/quantization/w8a8_int8.py:64-119@0.5.23)."""
    w = WeightQuant("int8", 8, "channel", symmetric=True)
    a = ActQuant("int8", dynamic=True, granularity="token")
    skip = _str_list(qcfg.get("ignore"))
    plan = QuantPlan(producer="w8a8_int8", quant_method="w8a8_int8", raw=qcfg)

    def resolve(name: str, role: str) -> Spec | None:
        if role not in _DECODER_LINEAR | {"expert"} or _not_convert(name, skip):
            return None
        return Spec(w, a, "quant_method w8a8_int8")

    plan._resolver = resolve
    return plan


# ------------------------------------------------------------------ formats the kernel rules do not serve

def _skip_list(qcfg: dict, *keys: str) -> list[str]:
    return [x for k in keys for x in _str_list(qcfg.get(k))]


def _weight_only_plan(producer: str, method: str, qcfg: dict, w: WeightQuant, note: str, *,
                      skip: list[str], act: ActQuant = ActQuant(), head: WeightQuant | None = None,
                      roles: frozenset = _DECODER_LINEAR | frozenset({"expert"})) -> QuantPlan:
    """Every linear layer of the decoder in one format (lm_head too when ``head`` is given)."""
    plan = QuantPlan(producer=producer, quant_method=method, raw=qcfg, format_note=note)

    def resolve(name: str, role: str) -> Spec | None:
        if role == "lm_head" and head is not None and not _not_convert(name, skip):
            return Spec(head, ActQuant(), f"quant_method {method} (head)")
        if role not in roles or _not_convert(name, skip):
            return None
        return Spec(w, act, f"quant_method {method}")

    plan._resolver = resolve
    return plan


def _bits_text(b) -> str:
    return f"{b:g}" if isinstance(b, (int, float)) and not isinstance(b, bool) else "?"


def _exl_plan(qcfg: dict, method: str) -> QuantPlan:
    """ExLlamaV2 (exl2) / ExLlamaV3 (exl3): a target average of `bits` per weight across the decoder
    (scales included) and `head_bits` for lm_head (exllamav2 conversion/compile.py writes
    quantization_config {quant_method, version, bits, head_bits, calibration})."""
    bits, head = qcfg.get("bits"), qcfg.get("head_bits")
    bpw = float(bits) if _is_num(bits) and 0 < bits <= 16 else 16.0
    hbw = float(head) if _is_num(head) and 0 < head <= 16 else None
    fmt = method.lower()
    w = WeightQuant(fmt, max(1, round(bpw)), "group", bpw=bpw)
    h = WeightQuant(fmt, max(1, round(hbw)), "group", bpw=hbw) if hbw else None
    note = f"{method.upper()}, {_bits_text(bits)} bits per weight" + (f" (lm_head {_bits_text(head)} bits)" if hbw
                                                                     else "")
    return _weight_only_plan(fmt, fmt, qcfg, w, note, skip=[], head=h)


def _is_num(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and v == v


def _mlx_plan(q: dict, key: str) -> QuantPlan:
    """MLX (mlx-lm convert): `quantization: {group_size, bits[, mode]}` (older) or the same under
    quantization_config (newer); per-module entries override (a dict) or exclude (false) a module
    (mlx_lm/utils.py quantize_model / class_predicate)."""
    bits = q.get("bits") if _num(q.get("bits")) else 4
    gs = q.get("group_size") if _num(q.get("group_size")) else 64
    mode = str(q.get("mode") or "affine")
    per = {k: v for k, v in q.items() if isinstance(v, (dict, bool)) and "." in k}
    w = _mlx_weight(mode, bits, gs)
    note = f"MLX {mode} {bits}-bit, group {gs}" + (f", {len(per)} per-module overrides" if per else "")
    plan = QuantPlan(producer="mlx", quant_method=f"mlx {mode}", raw=q, format_note=note)

    def resolve(name: str, role: str) -> Spec | None:
        if role in ("norm", "conv", "router"):
            return None
        o = per.get(name)
        if o is False:
            return None
        if isinstance(o, dict):
            return Spec(_mlx_weight(str(o.get("mode") or mode), o.get("bits") if _num(o.get("bits")) else bits,
                                    o.get("group_size") if _num(o.get("group_size")) else gs), ActQuant(),
                        f"{key}[{name!r}]")
        if role not in LINEAR_ROLES | {"embed", "mtp", "other"}:
            return None
        return Spec(w, ActQuant(), key)           # mlx quantizes the embedding and lm_head too

    plan._resolver = resolve
    return plan


def _mlx_weight(mode: str, bits: int, gs: int) -> WeightQuant:
    if mode == "mxfp4":
        return _MXFP4_W
    if mode == "nvfp4":
        return _nvfp4_w(16)
    return WeightQuant("mlx_affine", bits, "group", group_size=gs, symmetric=False)


def _foreign_plan(method: str, qcfg: dict) -> QuantPlan | None:
    """Producers whose formats the engines' kernel rules do not cover, or cover under another name."""
    if method in ("exl2", "exl3"):
        return _exl_plan(qcfg, method)
    if method == "bitnet":
        # transformers integrations/bitnet.py: ternary weights packed 4 per uint8 + a weight_scale,
        # activations quantized to int8 per token
        w = WeightQuant("ternary", 2, "tensor", symmetric=True, packing="uint8-4-per-byte", bpw=None)
        return _weight_only_plan("bitnet", "bitnet", qcfg, w, "BitNet ternary weights (1.58 bits, stored 2-bit), "
                                 "int8 activations", skip=_skip_list(qcfg, "modules_to_not_convert"),
                                 act=ActQuant("int8", dynamic=True, granularity="token"))
    if method == "hqq":
        wq = (qcfg.get("quant_config") or {}).get("weight_quant_params") if isinstance(
            qcfg.get("quant_config"), dict) else None
        wq = wq if isinstance(wq, dict) else qcfg
        bits = wq.get("nbits") if _num(wq.get("nbits")) else 4
        gs = wq.get("group_size") if _num(wq.get("group_size")) else 64
        w = WeightQuant("hqq", bits, "group", group_size=gs, symmetric=False)
        return _weight_only_plan("hqq", "hqq", qcfg, w, f"HQQ {bits}-bit, group {gs}",
                                 skip=_skip_list(qcfg, "skip_modules", "modules_to_not_convert"))
    if method == "aqlm":
        ig = qcfg.get("in_group_size") if _num(qcfg.get("in_group_size")) else 8
        og = qcfg.get("out_group_size") if _num(qcfg.get("out_group_size")) else 1
        nc = qcfg.get("num_codebooks") if _num(qcfg.get("num_codebooks")) else 1
        nb = qcfg.get("nbits_per_codebook") if _num(qcfg.get("nbits_per_codebook")) else 16
        bpw = nc * nb / (ig * og)
        w = WeightQuant("aqlm", max(1, round(bpw)), "group", group_size=ig * og, block=(nc, nb))
        return _weight_only_plan("aqlm", "aqlm", qcfg, w, f"AQLM {nc}x{nb} codebooks over {ig}x{og} groups "
                                 f"({bpw:g} bits per weight + codebooks)",
                                 skip=_skip_list(qcfg, "linear_weights_not_to_quantize"))
    if method == "eetq":
        # EETQ: int8 weights per output channel, fp16 activations (transformers integrations/eetq.py)
        w = WeightQuant("int8", 8, "channel", symmetric=True)
        return _weight_only_plan("eetq", "eetq", qcfg, w, "EETQ int8 weight-only",
                                 skip=_skip_list(qcfg, "modules_to_not_convert"))
    if method == "fbgemm_fp8":
        # transformers integrations/fbgemm_fp8.py: FP8 weights per channel, activations per token (dynamic)
        w = WeightQuant("fp8_e4m3", 8, "channel", symmetric=True)
        return _weight_only_plan("fbgemm_fp8", "fbgemm_fp8", qcfg, w, "FBGEMM FP8, per-channel weights, "
                                 "dynamic per-token activations", skip=_skip_list(qcfg, "modules_to_not_convert"),
                                 act=ActQuant("fp8_e4m3", dynamic=True, granularity="token"))
    if method == "smooth_quant":
        # LMDeploy `lite smooth_quant`: int8 weights per channel, int8 activations per token
        w = WeightQuant("int8", 8, "channel", symmetric=True)
        return _weight_only_plan("smooth_quant", "smooth_quant", qcfg, w, "LMDeploy SmoothQuant W8A8 int8",
                                 skip=_skip_list(qcfg, "modules_to_not_convert", "ignore"),
                                 act=ActQuant("int8", dynamic=True, granularity="token"))
    if method == "torchao":
        return _torchao_plan(qcfg)
    return None


def _torchao_plan(qcfg: dict) -> QuantPlan | None:
    """transformers TorchAoConfig: quant_type a string (older) or {"default": {"_type": ...Config, "_data": {..}}}."""
    qt = qcfg.get("quant_type")
    kind, data = "", {}
    if isinstance(qt, str):
        kind = qt
        data = qcfg.get("quant_type_kwargs") if isinstance(qcfg.get("quant_type_kwargs"), dict) else {}
    elif isinstance(qt, dict):
        entry = qt.get("default") if isinstance(qt.get("default"), dict) else next(
            (v for v in qt.values() if isinstance(v, dict)), {})
        kind = str(entry.get("_type") or "")
        data = entry.get("_data") if isinstance(entry.get("_data"), dict) else {}
    k = kind.lower().replace("_", "")
    gs = data.get("group_size") if _num(data.get("group_size")) else 128
    if "int4weightonly" in k or "int4wo" in k:
        w, a, what = WeightQuant("int4", 4, "group", group_size=gs, symmetric=False), ActQuant(), "int4 weight-only"
    elif "int8weightonly" in k:
        w, a, what = WeightQuant("int8", 8, "channel", symmetric=True), ActQuant(), "int8 weight-only"
    elif "int8dynamicactivationint8weight" in k:
        w, a = WeightQuant("int8", 8, "channel", symmetric=True), ActQuant("int8", dynamic=True, granularity="token")
        what = "int8 dynamic activations, int8 weights"
    elif "float8" in k and "weightonly" in k:
        w, a, what = WeightQuant("fp8_e4m3", 8, "channel", symmetric=True), ActQuant(), "float8 weight-only"
    elif "float8" in k:
        w, a = WeightQuant("fp8_e4m3", 8, "channel", symmetric=True), ActQuant("fp8_e4m3", dynamic=True,
                                                                             granularity="token")
        what = "float8 dynamic activations, float8 weights"
    else:
        return None
    return _weight_only_plan("torchao", "torchao", qcfg, w, f"torchao {what} ({kind})",
                             skip=_skip_list(qcfg, "modules_to_not_convert"), act=a)


def _unknown_plan(qcfg: dict, method: str | None, found: str) -> QuantPlan:
    """Quantization keys the advisor cannot read: the linear layers are UNKNOWN, never a confident 16-bit."""
    w = WeightQuant("unknown", 16, "unknown")
    plan = _weight_only_plan("unknown", method or "unknown", qcfg, w, f"UNKNOWN ({found})", skip=[])
    plan.producer = "unknown"
    return plan


def build_plan(config: dict | None, hf_quant: dict | None, quantize_config: dict | None = None) -> QuantPlan:
    """The plan of a checkpoint (see _build_plan), with its KV-cache quantization in words."""
    plan = _build_plan(config, hf_quant, quantize_config)
    plan = _deepseek_v4(config, plan)
    plan.kv_cache, plan.kv_detail = kv_words(plan.kv_cache_raw)
    return plan


def _build_plan(config: dict | None, hf_quant: dict | None, quantize_config: dict | None = None) -> QuantPlan:
    """The plan from config.json (top level or nested text_config), hf_quant_config.json and
    quantize_config.json (older GPTQ repos).

    Precedence follows the engines: vLLM builds the quantization config from config.json's
    ``quantization_config`` and opens the method's own file (hf_quant_config.json for ModelOpt,
    quantize_config.json for GPTQ) only when config.json has none (vllm
    model_executor/model_loader/weight_utils.py get_quant_config). ModelOpt's hf_quant_config.json
    still supplies the per-layer detail when both files agree on the algorithm.
    """
    notes: list[tuple[str, str]] = []
    qcfg, qc_key = None, "quantization_config"
    if isinstance(config, dict):
        qcfg = config.get("quantization_config")
        if qcfg is not None and not isinstance(qcfg, dict):
            notes.append((INVALID, f"config.json: quantization_config is {_show(qcfg)}, not an object: ignored; "
                                   "module formats come from the tensor headers (16-bit where they show none)"))
            qcfg = None
        if qcfg is None:
            for key in ("text_config", "language_config", "llm_config"):
                sub = config.get(key)
                if isinstance(sub, dict) and isinstance(sub.get("quantization_config"), dict):
                    qcfg, qc_key = sub["quantization_config"], f"{key}.quantization_config"
                    break
    if hf_quant is not None and not isinstance(hf_quant, dict):
        hf_quant = None
    if isinstance(config, dict) and qcfg is None and isinstance(config.get("quantization"), dict) and (
            "bits" in config["quantization"] or "group_size" in config["quantization"]):
        return _mlx_plan(config["quantization"], "quantization")          # older mlx-lm: top-level quantization
    if qcfg is not None and "quant_method" not in qcfg and not {"config_groups", "quant_algo", "producer"} & set(
            qcfg) and ("bits" in qcfg and "group_size" in qcfg) and quantize_config is None:
        return _mlx_plan(qcfg, qc_key)                                      # newer mlx-lm: no quant_method
    method = str((qcfg or {}).get("quant_method") or "").lower()
    producer = (qcfg or {}).get("producer")
    # ModelOpt 0.31 wrote no quant_method into config.json, only quant_algo and producer (§6 E2)
    is_modelopt = method.startswith("modelopt") or (not method and qcfg is not None and (
        "quant_algo" in qcfg or (isinstance(producer, dict) and producer.get("name") == "modelopt")))
    if hf_quant is not None and qcfg is not None:
        hf_algo = _hf_quant_algo(hf_quant)
        # a ModelOpt quant_algo in config.json is compared as such, whatever quant_method says
        # (nvidia/DeepSeek-V4-Flash-NVFP4 writes quant_method "fp8" next to quant_algo MIXED_PRECISION)
        cfg_algo = str(qcfg.get("quant_algo") or "").upper()
        if (cfg_algo and hf_algo and cfg_algo != hf_algo) or (not cfg_algo and method and not is_modelopt):
            notes.append((CONFLICT,
                          f"config.json {qc_key} declares {cfg_algo or 'quant_method ' + method} "
                          f"but hf_quant_config.json declares quant_algo {hf_algo or None}: engines read config.json "
                          "(vLLM opens hf_quant_config.json only when config.json has no quantization_config), "
                          "so the advisor follows config.json"))
            hf_quant = None
    if quantize_config is not None and (qcfg is not None or hf_quant is not None):
        qc_method = str(quantize_config.get("quant_method") or "gptq").lower()
        if qcfg is None or qc_method != method or any(
                k in quantize_config and k in qcfg and quantize_config[k] != qcfg[k] for k in ("bits", "group_size")):
            declared = (f"{qc_key} ({method or qcfg.get('quant_algo') or 'no quant_method'})" if qcfg is not None
                        else f"hf_quant_config.json quant_algo {_hf_quant_algo(hf_quant) or None}")
            src = "config.json" if qcfg is not None else "hf_quant_config.json"
            notes.append((CONFLICT,
                          f"quantize_config.json declares {qc_method} {_brief(quantize_config)} but {src} declares "
                          f"{declared}: engines read {src} and ignore quantize_config.json, so the advisor does too"))
    if hf_quant is not None or is_modelopt:
        return _modelopt_plan(qcfg or {}, hf_quant, notes, qc_key)
    gptq_where = ("config.json", qc_key)
    if qcfg is None and isinstance(quantize_config, dict):
        qcfg, method = quantize_config, str(quantize_config.get("quant_method") or "gptq").lower()
        gptq_where = ("quantize_config.json", "")
    if qcfg is None:
        return QuantPlan(producer="none", notes=notes)
    if method == "compressed-tensors" or (not method and "config_groups" in qcfg):
        return _ct_plan(qcfg, notes, qc_key)
    if method == "fp8":
        return _fp8_plan(qcfg, notes, qc_key)
    if method in ("gptq", "gptq_marlin", "awq", "awq_marlin", "auto-round", "autoround"):
        return _gptq_awq_plan(qcfg, method, notes, gptq_where)
    if method == "bitsandbytes":
        plan = _bnb_plan(qcfg)
    elif method == "mxfp4":
        plan = _mxfp4_plan(qcfg)
    elif method == "w8a8_int8":
        plan = _w8a8_int8_plan(qcfg)
    else:
        plan = _foreign_plan(method, qcfg)
        if plan is None:
            keys = ", ".join(sorted(str(k) for k in qcfg)[:6])
            found = f"quant_method {method!r}" if method else f"quantization_config keys {keys}"
            plan = _unknown_plan(qcfg, method or None, found)
            plan.notes.append(("unknown-quant-method",
                               f"quantization_config declares {found}, a format the advisor does not know: the "
                               "linear layers are UNKNOWN (tensor headers decide when present); sizes assume "
                               "16-bit weights, an upper bound"))
    plan.notes[:0] = notes
    return plan


def _deepseek_v4(config: dict | None, plan: QuantPlan) -> QuantPlan:
    """DeepSeek V4 `quant_method: fp8` checkpoints: FP8 block linears; routed experts per `expert_dtype`
    (default "fp4": MXFP4 weights, MXFP8 dynamic activations) unless `moe_quant_algo: NVFP4` makes them
    ModelOpt NVFP4 (vllm models/deepseek_v4/quant_config.py:59-70, 118-127, 214-232@0.33.0)."""
    if not isinstance(config, dict) or str(config.get("model_type") or "") != "deepseek_v4":
        return plan
    qcfg = config.get("quantization_config")
    if not isinstance(qcfg, dict) or str(qcfg.get("quant_method") or "").lower() != "fp8":
        return plan
    base = _fp8_plan(qcfg, plan.notes, "quantization_config")
    base.kv_cache_raw = plan.kv_cache_raw
    moe_algo = str(qcfg.get("moe_quant_algo") or "").upper()
    expert = str(config.get("expert_dtype") or "fp4")
    if moe_algo == "NVFP4":
        exp = Spec(_nvfp4_w(16), _NVFP4_ACT, "moe_quant_algo NVFP4 (ModelOpt NVFP4 experts)")
    elif expert == "fp4":
        exp = Spec(_MXFP4_W, ActQuant("fp8_e4m3", dynamic=True, granularity="group", group_size=32),
                   "expert_dtype fp4 (MXFP4 experts, MXFP8 activations)")
    else:
        return base
    skip = _str_list(qcfg.get("modules_to_not_convert"))
    base_resolve = base._resolver

    def resolve(name: str, role: str) -> Spec | None:
        if role == "expert":
            return None if _not_convert(name, skip) else exp
        return base_resolve(name, role)

    base._resolver = resolve
    base.quant_method = f"fp8 + {'NVFP4' if moe_algo == 'NVFP4' else 'MXFP4'} experts"
    return base


def _hf_quant_algo(hf_quant: dict) -> str:
    q = hf_quant.get("quantization") if isinstance(hf_quant.get("quantization"), dict) else hf_quant
    return str(q.get("quant_algo") or "").upper()


def _brief(qc: dict) -> str:
    parts = [f"{k} {qc[k]}" for k in ("bits", "group_size") if k in qc]
    return f"({', '.join(parts)})" if parts else ""
