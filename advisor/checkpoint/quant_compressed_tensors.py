"""compressed-tensors (llm-compressor): ``config_groups`` with targets, ``ignore`` lists and
QuantizationArgs per group (shared/research/checkpoint-formats.md §3)."""

from __future__ import annotations

import re

from advisor.checkpoint.model import ActQuant, WeightQuant
from advisor.checkpoint.quant_plan import QuantPlan, Spec, Where, group_size_of, int_or, show_value, str_list
from advisor.checkpoint.roles import LINEAR_ROLES
from advisor.errors import BadInput


def _ct_bits(args: dict, where: Where | None) -> int:
    """num_bits of a compressed-tensors QuantizationArgs (1..16, default 8 as CT's own default)."""
    v = args.get("num_bits", 8)
    if int_or(v, 0) in range(1, 17):
        return v
    # a 4-bit float format is the only one with a 16/32 group: keep what the rest of the entry says
    guess = 4 if args.get("type") == "float" and args.get("group_size") in (16, 32) else 8
    if where is not None:
        where.bad("num_bits", v, "not a valid bit width",
                  f"the advisor assumed {guess} from type {args.get('type')!r} and group_size "
                  f"{args.get('group_size')!r}")
    return guess


def ct_weight(args: dict | None, group_format: str | None = None, where: Where | None = None) -> WeightQuant:
    if not isinstance(args, dict):
        return WeightQuant()
    bits = _ct_bits(args, where)
    typ = args.get("type") if args.get("type") in ("int", "float") else "int"
    strategy = args.get("strategy")
    fp4 = typ == "float" and bits == 4
    gs = group_size_of(args, where, "the advisor assumed 16 as the NVFP4 format fixes" if fp4 else
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


def ct_act(args: dict | None, where: Where | None = None) -> ActQuant:
    if not isinstance(args, dict):
        return ActQuant()
    bits = _ct_bits(args, where)
    typ = args.get("type") if args.get("type") in ("int", "float") else "int"
    gs = group_size_of(args, where, "the advisor assumed 16 as the NVFP4 format fixes" if typ == "float" and bits == 4
                     else "treated as not given (granularity from strategy)", channel_ok=True)
    dyn = args.get("dynamic")
    dynamic = dyn is True or dyn == "local"
    strategy = args.get("strategy")
    if typ == "float" and bits == 4:
        fmt = "mxfp4" if gs == 32 else "nvfp4"
        return ActQuant(fmt, dynamic=dynamic, granularity="group", group_size=gs or (32 if fmt == "mxfp4" else 16))
    fmt = "fp8_e4m3" if typ == "float" and bits == 8 else (f"int{bits}" if typ == "int" else f"fp{bits}")
    by_strategy: dict[str | None, str] = {"token": "token", "tensor": "tensor", "group": "group",
                                          "tensor_group": "group"}
    gran = by_strategy.get(strategy, "tensor" if gs is None else "group")
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


def ct_plan(qcfg: dict, notes: list, qc_key: str) -> QuantPlan:
    groups = qcfg.get("config_groups")
    where = Where(notes, "config.json", qc_key)
    if groups is None:
        groups = {}
    if not isinstance(groups, dict):
        # nothing to read the module formats from: the whole declaration is void
        raise BadInput(f"{qc_key}.config_groups is {show_value(groups)}, not a mapping of group name to scheme",
                       path="config.json")
    ignore = str_list(qcfg.get("ignore"))
    top_format = qcfg.get("format")
    table: list[tuple[str, list[str], WeightQuant, ActQuant]] = []
    for gname, g in groups.items():
        gw = where.sub(f"config_groups.{gname}")
        if not isinstance(g, dict):
            raise BadInput(f"{gw.key} is {show_value(g)}, not a scheme object (weights, input_activations, targets)",
                           path="config.json")
        fmt = g.get("format") or (top_format if top_format != "mixed-precision" else None)
        targets = str_list(g.get("targets"))
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
