"""The checkpoint's modules, one row each, before they are grouped and summed.

From the safetensors headers (what the tensors show, merged with what the config declares) or, when
no weights are present, synthesized from the architecture; then grouped by name pattern and scheme.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, replace
from functools import lru_cache
from operator import attrgetter, itemgetter

from advisor.checkpoint.arch import text_config
from advisor.checkpoint.model import ActQuant, ArchInfo, Finding, ModuleGroup, WeightQuant
from advisor.checkpoint.name_columns import expert_number, name_columns, natural_keys, natural_order_of
from advisor.checkpoint.quant_plan import QuantPlan
from advisor.checkpoint.roles import group_name, layer_index, role_of
from advisor.checkpoint.schemes import BF16, NO_ACT, is_quantized, scheme_label, stored_bytes
from advisor.checkpoint.sources import CheckpointFiles
from advisor.checkpoint.tensors import ModuleTensor, observe


@dataclass(slots=True)
class ModuleRow:
    """One module (or one stack of experts) before grouping. Slots: a 100k-tensor MoE builds 25k."""

    name: str
    role: str
    weight: WeightQuant
    act: ActQuant
    count: int
    params: int
    stored_bytes: int
    shape: tuple[int, int] | None
    layer: int | None
    tensors: dict[str, tuple] | None = None    # from headers: suffix -> ModuleTensor's fields (None: from the config)
    group: str | None = None            # group_name(name), when already worked out
    # from headers: one object per tensor layout (the same suffixes, dtypes and shapes), shared by the rows
    # of that layout, so a per-layout answer (doctor: which scalars to read) is worked out once
    layout: tuple | None = None
    path: str = ""                      # from headers: the shard of the module's first tensor
    shards: dict[str, str] | None = None    # suffix -> shard of a tensor not in ``path`` (a module split)
    expert: str | None = None           # from headers: the expert number as written ("": none); None: not read yet

    def shard_of(self, suffix: str) -> str:
        shards = self.shards
        return shards.get(suffix, self.path) if shards else self.path

    @property
    def scheme(self) -> str:
        return scheme_label(self.weight, self.act)


# ------------------------------------------------------------------ modules from headers

def modules_from_headers(files: CheckpointFiles, plan: QuantPlan,
                         arch: ArchInfo) -> tuple[list[ModuleRow], list[Finding]]:
    """The rows of the headers' modules in natural order (sort_naturally's), and what they contradict in the
    config (findings naming modules in file order)."""
    grouped = files.grouped
    assert grouped is not None          # load() groups whatever headers it read
    split = grouped.shards
    findings: list[Finding] = []
    mods: list[ModuleRow] = []
    bad_bf16: list[str] = []
    ignored_q: list[str] = []
    mismatch: list[str] = []
    unscaled: list[str] = []
    act_conflict: list[str] = []
    # A 100k-tensor MoE repeats a few module shapes thousands of times: roles (and the config's spec, where
    # the plan allows: QuantPlan.by_pattern) are decided per name pattern (role_of reads no index but the
    # layer's), and everything else per (spec, role, tensor layout), so per module only the name is looked
    # at (benchmarks/inspect_speed.py).
    decided: tuple[dict, dict] = ({}, {})      # pattern -> (pattern, role, spec): layers below / from n_layers
    seen: dict[tuple, tuple] = {}
    n_layers = arch.num_layers or None
    spec_by_pattern = plan.by_pattern
    producer_ignores = plan.producer not in ("none", "unknown")
    row = ModuleRow
    names = list(grouped.tensors)
    cols = name_columns(names)
    for (name, tensors), path, pattern, layer, expert in zip(grouped.tensors.items(), grouped.paths, cols.patterns,
                                                             cols.layers, cols.experts):
        by_pattern = decided[n_layers is not None and layer is not None and layer >= n_layers]
        got = by_pattern.get(pattern)
        if got is None:         # one string per pattern, kept by each row
            role = role_of(name, n_layers)
            got = by_pattern[pattern] = (pattern, role, plan.spec_for(name, role) if spec_by_pattern else None)
        pattern, role, spec = got
        if not spec_by_pattern:
            spec = plan.spec_for(name, role)
        entries = tensors.values()
        # one flat key: its length tells the number of tensors, so the suffixes, dtypes and shapes cannot mix
        okey = (id(spec), role, *tensors, *map(_DTYPE, entries), *map(_SHAPE, entries))
        hit = seen.get(okey)
        if hit is None:
            hit = seen[okey] = _decide(tensors, spec, role, producer_ignores)
        w, a, count, params, shape, flags, _, nbytes, _ = hit
        if flags:
            if flags & _BAD_BF16:
                bad_bf16.append(name)
            if flags & _UNSCALED:
                unscaled.append(name)
            if flags & _IGNORED:
                ignored_q.append(name)
            if flags & _MISMATCH:
                mismatch.append(f"{name}: {hit[6]}")
            if flags & _ACT_CONFLICT:
                act_conflict.append(name)
        mods.append(row(name, role, w, a, count, params, nbytes, shape, layer, tensors, pattern, hit, path,
                        split.get(name) if split else None, expert))
    sev_list = (
        ("config-quantized-but-bf16", "warn", bad_bf16,
         "the config declares {n} module(s) quantized but their tensors are 16-bit (no scales)"),
        ("ignored-but-quantized", "warn", ignored_q,
         "{n} module(s) are excluded/ignored in the config but their tensors are quantized"),
        ("config-tensor-mismatch", "error", mismatch,
         "{n} module(s) store a different weight format than the config declares"),
        ("quantized-without-scales", "error", unscaled,
         "{n} module(s) have low-precision weights but no scale tensors"),
        ("static-input-scale-on-weight-only", "info", act_conflict,
         "{n} module(s) carry static input scales although the config declares weight-only"),
    )
    for code, sev, listed, msg in sev_list:
        if listed:
            findings.append(Finding(code, sev, msg.format(n=len(listed)), detail="; ".join(listed[:5]),
                                    modules=tuple(listed[:50])))
    mods[:] = map(mods.__getitem__, cols.order)
    return mods, findings


_DTYPE, _SHAPE = itemgetter(1), itemgetter(2)      # of a module tensor
_BAD_BF16, _UNSCALED, _IGNORED, _MISMATCH, _ACT_CONFLICT = 1, 2, 4, 8, 16


def _decide(tensors: dict[str, tuple], spec, role: str, producer_ignores: bool) -> tuple:
    """(weight, act, count, params, shape, finding flags, mismatch text, stored bytes, spec) of a module: the same
    for every module of the same spec, role and tensor layout (dtypes and shapes by suffix). The stored
    bytes too: every header entry spans exactly the bytes its dtype and shape need (parse_header_bytes)."""
    nbytes = sum(e[4] - e[3] for e in tensors.values())
    named = {k: ModuleTensor._make(e) for k, e in tensors.items()}      # fields named, for observe()
    bits = _packed_bits(spec)
    obs = observe(named, int_bits=bits)
    if obs is None:
        # no matrix weight (A_log, dt_bias, k/v scales alone): count bytes, BF16-kept
        return BF16, NO_ACT, 1, sum(t.numel for t in named.values()), None, 0, "", nbytes, spec
    w, a = obs.weight, obs.act
    flags, why = 0, ""
    if not is_quantized(w):
        if spec is not None and is_quantized(spec.weight):
            flags |= _BAD_BF16
        a = NO_ACT
    else:
        if not obs.has_scale:
            flags |= _UNSCALED
        if spec is None:
            if producer_ignores:
                flags |= _IGNORED
            a = a if a is not None else NO_ACT
        elif _family(spec.weight) != _family(w):
            flags |= _MISMATCH
            why = f"config {spec.weight.format}, tensors {w.format}"
            a = a if a is not None else NO_ACT
        else:
            w = _merge_weight(spec.weight, w)
            if a is not None and a.format != "none" and spec.act.format == "none":
                flags |= _ACT_CONFLICT
            a = spec.act
    count, shape = obs.count, obs.shape
    if role == "conv":
        # a conv1d weight [channels, 1, kernel] is one module, not `channels` stacked experts
        count, shape = 1, None
    return w, a, count, obs.params, shape, flags, why, nbytes, spec


def _packed_bits(spec) -> int | None:
    """Bit width of int weights packed into int32 words: only the config knows it."""
    if spec is None:
        return None
    w = spec.weight
    if w.bits < 8 or (w.packing or "").startswith("int32"):
        return w.bits
    return None


def _family(w: WeightQuant) -> str:
    f = w.format
    if f.startswith("fp8"):
        return "fp8"
    if f in ("int4", "uint4", "nf4", "fp4") or (f.startswith(("int", "uint")) and w.bits < 8):
        return "int4"
    if f in ("int8", "uint8"):
        return "int8"
    return f


@lru_cache(maxsize=256)
def _merge_weight(declared: WeightQuant, seen: WeightQuant) -> WeightQuant:
    """The config's description; the tensors fill in what it leaves open (a tiny tensor with one
    block or one group looks per-tensor in its header, so the declaration wins where it speaks)."""
    if declared.granularity in ("unknown", "none", ""):
        return replace(declared, granularity=seen.granularity, group_size=seen.group_size, block=seen.block)
    return replace(declared, packing=declared.packing or seen.packing)


# ------------------------------------------------------------------ modules from config

def modules_from_config(config: dict, plan: QuantPlan, arch: ArchInfo,
                         files: CheckpointFiles) -> tuple[list[ModuleRow], list[str]]:
    """Modules synthesized from the architecture, and what could not be synthesized faithfully."""
    import json

    from advisor.checkpoint.synth import synthesize

    raw = json.dumps(plan.raw)[:200_000] if plan.raw else ""
    unq = unquantized_format(config)
    mods = []
    syn = synthesize(config, quant_text=raw)
    for sm in syn.modules:
        role = role_of(sm.name, arch.num_layers or None)
        spec = plan.spec_for(sm.name, role) if sm.in_f > 1 else None
        if spec is not None and (role in ("norm", "conv") or (role == "embed" and plan.producer != "mlx")):
            spec = None            # mlx-lm quantizes the embedding too (nn.Embedding has to_quantized)
        w, a = (spec.weight, spec.act) if spec else (unq, NO_ACT)
        one = stored_bytes(w, sm.out_f, sm.in_f)
        shape = (sm.out_f, sm.in_f) if sm.in_f > 1 else None
        mods.append(ModuleRow(sm.name, role, w, a, sm.count, sm.out_f * sm.in_f * sm.count, one * sm.count, shape,
                        layer_index(sm.name)))
    return mods, syn.notes


def unquantized_format(config: dict) -> WeightQuant:
    dt = str(config.get("torch_dtype") or config.get("dtype") or text_config(config).get("torch_dtype")
             or text_config(config).get("dtype") or "bfloat16")
    if dt in ("float16", "half", "torch.float16"):
        return WeightQuant("fp16", 16)
    if dt in ("float32", "torch.float32"):
        return WeightQuant("fp32", 32)
    return BF16


# ------------------------------------------------------------------ grouping, label, totals

def sort_naturally(mods: list[ModuleRow]) -> None:
    """``mods.sort(key=lambda m: natural_order(m.name))`` (stable), keyed in a few C passes (natural_keys)."""
    names = [m.name for m in mods]
    mods[:] = map(mods.__getitem__, natural_order_of(names, natural_keys(names)))


def group_modules(mods: list[ModuleRow]) -> list[ModuleGroup]:
    acc: dict[tuple, list] = {}
    # rows share their weight/act objects (one per layout): the full key, whose dataclass hashes cost
    # ~1 us, is built once per (pattern, role, weight, act, shape) by identity
    by_ids: dict[tuple, list] = {}
    for m in mods:
        pattern = m.group if m.group is not None else group_name(m.name)
        layout = m.layout               # a row from headers: its layout object fixes weight, act and shape
        ikey = (pattern, m.role, id(layout)) if layout is not None else (pattern, m.role, id(m.weight), id(m.act),
                                                                           m.shape)
        g = by_ids.get(ikey)
        if g is None:
            key = (pattern, m.role, m.scheme, m.weight, m.act, m.shape)
            g = acc.get(key)
            if g is None:
                g = acc[key] = [0, 0, 0, set()]
            by_ids[ikey] = g
        g[0] += m.count
        g[1] += m.params
        g[2] += m.stored_bytes
        if m.layer is not None:
            g[3].add(m.layer)
    out = []
    for (name, role, scheme, w, a, shape), (count, params, nbytes, layers) in acc.items():
        out.append(ModuleGroup(name=name, role=role, scheme=scheme, weight=w, act=a, count=count,
                               params=params, stored_bytes=nbytes, shape=shape, layers=tuple(sorted(layers))))
    return out


def layout_flags(mods: list[ModuleRow], test) -> list[bool]:
    """``test(row)`` of each row, asked once per layout object: the rows of one (modules_from_headers) share
    weight, act, count, shape and tensors' layout. Rows without one (from the config) are asked each."""
    layouts = list(map(_LAYOUT, mods))
    if None in layouts:
        return list(map(test, mods))
    ids = list(map(id, layouts))
    verdict = {key: test(m) for key, m in dict(zip(ids, mods)).items()}
    return list(map(verdict.__getitem__, ids))


_LAYOUT = attrgetter("layout")


def experts_per_layer(mods: list[ModuleRow]) -> int:
    """Experts actually present per MoE layer (expert-pruned checkpoints hold fewer than the config says)."""
    per_layer: dict[int, set] = defaultdict(set)
    stacked = 0
    for m in mods:
        if m.role != "expert" or m.layer is None:
            continue
        if m.count > 1:
            stacked = max(stacked, m.count)
        else:
            idx = m.expert      # read with the headers (name_columns); None: not read yet
            if idx is None:
                idx = expert_number(m.name)
            if idx:
                per_layer[m.layer].add(idx)
    # distinct expert numbers ("07" and "7" are one): int() once per distinct string, not per module
    return max([stacked] + [len(set(map(int, s))) for s in per_layer.values()])
