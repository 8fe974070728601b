"""What a conversion will do, decided before any weight is written: which tensors are quantized
(and why the others stay), which share a global scale, the output tensors and their shards."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from advisor.convert import rules
from advisor.convert.nvfp4_math import BLOCK
from advisor.convert.safetensors_io import DTYPE_SIZES, OutSpec, read_bytes
from advisor.convert.source import Checkpoint, model_type
from advisor.errors import BadInput, Unsupported

SOURCE_DTYPES = ("BF16", "F16")
SUPPORTED_ALGOS = ("NVFP4", "W4A16_NVFP4")


@dataclass(frozen=True)
class Options:
    weight_only: bool = False
    keep: tuple[str, ...] = ()            # extra keep-in-BF16 patterns (module names, fnmatch)
    max_shard_bytes: int = 10 * 10**9     # ModelOpt/transformers default "10GB"
    threads: int = 1                      # parallel workers over tensors and row spans (CLI --jobs)
    chunk_elements: int = 1 << 18        # values per chunk: few NumPy calls per value, buffers stay in L2/L3


@dataclass(frozen=True)
class Quantized:
    module: str
    source: str                 # source tensor name (module + ".weight")
    shape: tuple[int, int]
    group: str                  # fused-group id (the members' common parent, or the module)
    rule: str                   # fused-group rule name, "" for a group of one
    input_scale: bytes | None   # F32 bytes to write, None: no input_scale tensor


@dataclass(frozen=True)
class Kept:
    name: str
    reason: str


@dataclass
class Plan:
    source: Checkpoint
    reference: Checkpoint | None
    options: Options
    weight_only: bool
    quantized: dict[str, Quantized]                       # module -> entry
    kept: list[Kept]
    groups: dict[str, tuple[str, ...]]                    # group id -> member modules
    group_source: str
    shards: dict[str, list[OutSpec]]                      # file -> specs in file order
    hf_quant_config: dict
    quantization_config: dict
    notes: list[str] = field(default_factory=list)

    @property
    def output_bytes(self) -> int:
        return sum(s.nbytes for specs in self.shards.values() for s in specs)


def reference_format(ref: Checkpoint) -> tuple[str, dict, dict | None]:
    """(quant_algo, hf_quant_config, config.json quantization_config) of a ModelOpt reference."""
    qc = ref.config.get("quantization_config")
    hq = ref.hf_quant_config
    if hq is None and not (isinstance(qc, dict) and qc.get("quant_method") == "modelopt"):
        raise BadInput("reference is not a ModelOpt checkpoint (no hf_quant_config.json and no "
                       "modelopt quantization_config in config.json)", path=str(ref.root))
    quant = hq.get("quantization") if isinstance(hq, dict) else None     # any JSON value: type-checked here
    algo = (quant.get("quant_algo") if isinstance(quant, dict) else None) or \
        (qc.get("quant_algo") if isinstance(qc, dict) else None)
    if algo not in SUPPORTED_ALGOS:
        raise Unsupported(f"reference quant_algo is {algo}; only uniform NVFP4 / W4A16_NVFP4 "
                          "references can be reproduced", path=str(ref.root))
    if hq is None:
        assert isinstance(qc, dict), "without hf_quant_config.json, qc is ModelOpt's (checked above)"
        ignore = qc.get("ignore")
        hq = {"producer": qc.get("producer"), "quantization": {
            "quant_algo": algo, "kv_cache_quant_algo": None, "group_size": 16,
            "exclude_modules": list(ignore) if isinstance(ignore, list) else []}}
    return algo, hq, qc if isinstance(qc, dict) else None


def reference_modules(ref: Checkpoint) -> set[str]:
    """Modules stored as NVFP4 in the reference (U8 weight with F8_E4M3 weight_scale)."""
    out = set()
    for name, e in ref.tensors.items():
        if name.endswith(".weight_scale") and e.dtype == "F8_E4M3":
            module = name[: -len(".weight_scale")]
            w = ref.tensors.get(module + ".weight")
            if w is not None and w.dtype == "U8":
                out.add(module)
    return out


def scalar_bytes(ref: Checkpoint, name: str) -> bytes | None:
    e = ref.tensors.get(name)
    if e is None:
        return None
    if e.dtype != "F32" or e.nbytes != 4:
        raise BadInput(f"reference tensor {name} is {e.dtype} {list(e.shape)}, expected an F32 scalar",
                       path=str(e.file))
    return read_bytes(e)


def groups_from_reference(ref: Checkpoint, modules: list[str]) -> dict[str, tuple[str, ...]]:
    """Siblings whose reference weight_scale_2 are bit-identical share a scale.

    Equal values of siblings that were not fused in the reference come from equal amaxes, and
    then sharing gives the same result, so equality is enough evidence."""
    by_key: dict[tuple[str, bytes], list[str]] = {}
    for m in modules:
        raw = scalar_bytes(ref, m + ".weight_scale_2")
        if raw is None:
            raise BadInput(f"reference lacks {m}.weight_scale_2", path=str(ref.root))
        by_key.setdefault((rules.module_of(m), raw), []).append(m)
    groups = {}
    for (parent, _), members in by_key.items():
        gid = members[0] if len(members) == 1 else f"{parent}:{'+'.join(x.rsplit('.', 1)[-1] for x in members)}"
        groups[gid] = tuple(members)
    return groups


def build_plan(src: Checkpoint, ref: Checkpoint | None, options: Options, *,
               groups_from: str = "auto") -> Plan:
    """groups_from: "auto" (reference when given, else the name table) or "table"."""
    if not (src.root / "config.json").is_file():
        raise BadInput("config.json missing: the output's config.json is the source's plus quantization_config, "
                       "and without the architecture no engine can load it", path=str(src.root))
    if isinstance(src.config.get("quantization_config"), dict) or src.hf_quant_config is not None:
        raise BadInput("source is already quantized (config.json has quantization_config or "
                       "hf_quant_config.json exists); convert a BF16/FP16 checkpoint", path=str(src.root))
    notes: list[str] = []
    keep_patterns = rules.DEFAULT_KEEP + tuple(options.keep)
    ref_modules: set[str] | None = None
    weight_only = options.weight_only
    if ref is not None:
        algo, hq, qc = reference_format(ref)
        ref_modules = reference_modules(ref)
        weight_only = algo == "W4A16_NVFP4"
        if options.keep:
            notes.append("--keep patterns are ignored where the reference decides (the reference wins)")
        if options.weight_only != weight_only and options.weight_only:
            notes.append(f"--weight-only ignored: the reference is {algo}")

    quantized: dict[str, Quantized] = {}
    kept: list[Kept] = []
    for name, e in src.tensors.items():
        module, leaf = rules.module_of(name), name.rsplit(".", 1)[-1]
        if ref_modules is not None:
            if leaf == "weight" and module in ref_modules:
                candidate = True
            else:
                candidate = False
                if leaf == "weight" and len(e.shape) >= 2:
                    kept.append(Kept(name, "not quantized in the reference"))
        else:
            candidate = leaf == "weight" and len(e.shape) == 2
            pat = rules.matching_keep_pattern(module, keep_patterns) if leaf == "weight" and len(e.shape) >= 2 else None
            if pat is not None:
                kept.append(Kept(name, f"keep pattern {pat}"))
                candidate = False
            elif leaf == "weight" and len(e.shape) > 2:
                kept.append(Kept(name, f"{len(e.shape)}-D weight is not a linear layer"))
            elif candidate and 0 in e.shape:
                kept.append(Kept(name, "empty weight (a zero dimension)"))
                candidate = False
        if not candidate:
            continue
        if len(e.shape) != 2:
            raise BadInput(f"tensor {name} has shape {list(e.shape)}; NVFP4 needs a 2-D linear weight",
                           path=str(e.file))
        if e.dtype not in SOURCE_DTYPES:
            raise BadInput(f"tensor {name} is {e.dtype}; the converter reads BF16 or FP16 weights",
                           path=str(e.file))
        n, k = e.shape
        if k % BLOCK:
            raise BadInput(f"tensor {name} has K={k}, not divisible by the NVFP4 block size 16 "
                           f"(keep it in BF16 with --keep '{module}')", path=str(e.file))
        if ref is not None:
            rw = ref.tensors[module + ".weight"]
            if tuple(rw.shape) != (n, k // 2):
                raise BadInput(f"the reference is not a quantization of this model: {name} is {[n, k]} here, "
                               f"so its packed weight would be {[n, k // 2]}, but the reference's is "
                               f"{list(rw.shape)}", path=str(ref.root))
        quantized[module] = Quantized(module, name, (n, k), module, "", None)

    if ref_modules is not None:   # set exactly when there is a reference
        missing = sorted(ref_modules - quantized.keys())
        if missing:
            raise BadInput(f"reference quantizes {len(missing)} module(s) the source lacks, e.g. "
                           f"{missing[0]}", path=str(src.root))

    if ref is None:
        modules_seen = {rules.module_of(n) for n, e in src.tensors.items() if len(e.shape) >= 2}
        for pat in options.keep:
            if not any(rules.matching_keep_pattern(mod, (pat,)) for mod in modules_seen):
                example = next(iter(sorted(modules_seen)), "model.layers.0.mlp.down_proj")
                notes.append(f"--keep {pat!r} matched no module: patterns match module names "
                             f"such as {example} (without .weight)")
    if not quantized:
        why = (f"{len(kept)} 2-D weight(s) are all kept ({kept[0].reason}, ...)" if kept
               else "no 2-D '<module>.weight' tensor found")
        raise BadInput(f"nothing to quantize: {why}; the output would not be NVFP4", path=str(src.root))
    modules = list(quantized)
    if ref is not None and groups_from == "auto":
        groups = groups_from_reference(ref, modules)
        group_rule = {gid: ("equal in reference" if len(m) > 1 else "") for gid, m in groups.items()}
        group_source = "from the reference: siblings with bit-identical weight_scale_2"
        table, table_note = rules.table_for(model_type(src.config))
        table_sets = {frozenset(mm) for _, mm in rules.groups_from_table(modules, table)}
        differ = [mm for mm in groups.values() if len(mm) > 1 and frozenset(mm) not in table_sets]
        if differ:
            notes.append(f"{len(differ)} reference group(s) differ from the {table_note}, e.g. "
                         f"{', '.join(differ[0])} (siblings can also share a value by coincidence)")
    else:
        table, group_source = rules.table_for(model_type(src.config))
        groups, group_rule = {}, {}
        for rule_name, members in rules.groups_from_table(modules, table):
            gid = members[0] if len(members) == 1 else f"{rules.module_of(members[0])}:{rule_name}"
            groups[gid] = members
            group_rule[gid] = rule_name
    for gid, members in groups.items():
        for m in members:
            q = quantized[m]
            if ref is not None:
                iscale = scalar_bytes(ref, m + ".input_scale")
            else:
                iscale = None if weight_only else np.float32(1.0).tobytes()
            quantized[m] = Quantized(m, q.source, q.shape, gid, group_rule[gid], iscale)

    # output tensors, in source order
    out_specs: list[OutSpec] = []
    for name, e in src.tensors.items():
        module = rules.module_of(name)
        made = quantized.get(module)
        if made is not None and name == made.source:
            n, k = made.shape
            out_specs += [OutSpec(name, "U8", (n, k // 2)),
                          OutSpec(module + ".weight_scale", "F8_E4M3", (n, k // BLOCK)),
                          OutSpec(module + ".weight_scale_2", "F32", ())]
            if made.input_scale is not None:
                out_specs.append(OutSpec(module + ".input_scale", "F32", ()))
        else:
            out_specs.append(OutSpec(name, e.dtype, e.shape))
    shards = _assign_shards(out_specs, ref, options.max_shard_bytes, notes)

    unquantized = [rules.module_of(k.name) for k in kept
                   if src.tensors[k.name].shape and len(src.tensors[k.name].shape) >= 2]
    if ref is not None:
        hq_out = hq
        qc_out = qc
        if qc_out is None:
            from advisor.convert.modelopt_config import quantization_config
            qc_out = quantization_config(hq)
    else:
        from advisor.convert.modelopt_config import hf_quant_config, quantization_config
        hq_out = hf_quant_config(weight_only=weight_only,
                                 exclude_modules=rules.summarize_exclude_modules(unquantized, modules))
        qc_out = quantization_config(hq_out)
    return Plan(src, ref, options, weight_only, quantized, kept, groups, group_source, shards,
                hq_out, qc_out, notes)


def _assign_shards(specs: list[OutSpec], ref: Checkpoint | None, max_bytes: int,
                   notes: list[str]) -> dict[str, list[OutSpec]]:
    files: dict[str, list[OutSpec]] = {}
    if ref is not None:
        last = ref.shard_files[-1]
        stray = []
        for s in specs:
            f = ref.weight_map.get(s.name)
            if f is None:
                stray.append(s.name)
                f = last
            files.setdefault(f, []).append(s)
        if stray:
            notes.append(f"{len(stray)} tensor(s) not in the reference were put in {last}, e.g. {stray[0]}")
        files = {f: files[f] for f in ref.shard_files if f in files}
    else:
        chunks: list[list[OutSpec]] = [[]]
        size = 0
        for s in specs:
            if chunks[-1] and size + s.nbytes > max_bytes:
                chunks.append([])
                size = 0
            chunks[-1].append(s)
            size += s.nbytes
        if len(chunks) == 1:
            files["model.safetensors"] = chunks[0]
        else:
            n = len(chunks)
            for i, c in enumerate(chunks, 1):
                files[f"model-{i:05d}-of-{n:05d}.safetensors"] = c
    # within a file: widest dtype first (keeps every tensor aligned), source order otherwise
    return {f: sorted(s, key=lambda x: -DTYPE_SIZES[x.dtype]) for f, s in files.items()}
