"""Doctor checks: what is wrong or misleading about a checkpoint, as Findings.

Two checks read tensor *data*, and only F32 scalars of local files: the fused global scales
(fused_scales.py) and a sample of NVFP4 input scales (uncalibrated_input_scales; scalar_reads.py).
"""

from __future__ import annotations

import operator
from itertools import compress
from math import prod as _prod

from advisor.checkpoint.arch import _pos, invalid_numbers, text_config
from advisor.checkpoint.fused_scales import fused_scale_mismatch
from advisor.checkpoint.model import ArchInfo, Finding, ModuleGroup, Scheme
from advisor.checkpoint.modules import ModuleRow, experts_per_layer, layout_flags
from advisor.checkpoint.quant_plan import CONFLICT, INVALID, QuantPlan
from advisor.checkpoint.scalar_reads import read_scalars
from advisor.checkpoint.schemes import is_quantized
from advisor.checkpoint.sources import CheckpointFiles
from advisor.errors import BadInput

_FIRST = operator.itemgetter(0)
_NOTE_SEVERITY = {"modelopt-config-groups-contradict": "info", INVALID: "error", CONFLICT: "warn"}
_ROLE, _LAYER_INDEX = operator.attrgetter("role"), operator.attrgetter("layer")     # of a row


def note_severity(code: str) -> str:
    return _NOTE_SEVERITY.get(code, "warn")


def findings(files: CheckpointFiles, plan: QuantPlan, arch: ArchInfo, mods: list[ModuleRow],
             groups: list[ModuleGroup], label: Scheme, shares: dict[Scheme, float],
             experts: int | None = None) -> list[Finding]:
    """``experts``: experts_per_layer(mods), when the caller has it (None: worked out here)."""
    if files.headers and not any(h.count for h in files.headers):
        # a header of metadata only: every size and speed would be computed from zero bytes
        raise BadInput("no tensors in the safetensors header (nothing to size or classify)",
                       path=files.headers[0].path if len(files.headers) == 1 else files.source)
    out: list[Finding] = []
    for code, msg in plan.notes:
        if code == "producer":
            continue
        out.append(Finding(code, _NOTE_SEVERITY.get(code, "warn"), msg))
    out += arch_number_checks(files.config)
    quantized = [m for m in mods if is_quantized(m.weight)] if plan.producer == "none" else []
    if quantized:
        out.append(Finding("quantized-without-config", "warn",
                           "tensors are quantized but the config has no quantization_config: formats come from "
                           "the headers and dynamic activation quantization cannot be seen",
                           modules=tuple(m.name for m in quantized[:20])))
    if files.headers:
        out += _index_checks(files)
        out += _kv_checks(files, plan)
        out += _layer_checks(arch, mods, files.config, experts)
        if files.local:
            out += fused_scale_mismatch(files, mods)
            out += uncalibrated_input_scales(files, mods)
    out += _dtype_check(files, groups)
    out += _mixed_checks(label, shares)
    out += _declared_layer_checks(files, plan, mods)
    return out


def _declared_layer_checks(files, plan, mods) -> list[Finding]:
    """quantized_layers entries that name no module: their declared format lands nowhere, so those weights are
    counted in whatever format the module list holds (a config-only module list named unlike the checkpoint)."""
    if not plan.declared_layers:
        return []
    from advisor.checkpoint.roles import group_name
    from advisor.checkpoint.synth import names_absent     # synth: ~2 ms of imports a cold `inspect` need not pay

    absent = names_absent(plan.declared_layers, ((m.name, m.count) for m in mods))
    if not absent:
        return []
    patterns: dict[str, int] = {}
    for name in absent:
        patterns[group_name(name)] = patterns.get(group_name(name), 0) + 1
    where = "the safetensors files" if files.headers else "the modules synthesized from config.json"
    shown = ", ".join(f"{p} ({n})" for p, n in list(patterns.items())[:3])
    return [Finding("quantized-layers-unmatched", "warn",
                    f"{len(absent)} of {len(plan.declared_layers)} quantized_layers entries name no module of {where}, "
                    f"e.g. {shown}: their declared formats are not applied, so sizes and the scheme label may be "
                    "wrong", detail="; ".join(f"{p} ({n})" for p, n in patterns.items()), modules=tuple(absent[:50]))]


def _mixed_checks(label: Scheme, shares: dict[Scheme, float]) -> list[Finding]:
    if label != "MIXED":
        return []
    fp8 = sum(v for k, v in shares.items() if k.endswith("FP8") and not k.startswith("W4"))
    fp4 = sum(v for k, v in shares.items() if "NVFP4" in k or "MXFP4" in k)
    if fp4 > 0 and fp8 > fp4:
        return [Finding("fp8-dominates-mixed", "warn",
                        f"FP8 holds {fp8:.0%} of the quantized linear bytes and FP4 only {fp4:.0%}: "
                        "an 'NVFP4' name is misleading, most of the weights run as FP8")]
    return []


def _index_checks(files) -> list[Finding]:
    if not files.index:
        return []
    wm = files.index.get("weight_map") or {}
    import os

    total = sum(h.data_bytes for h in files.headers)    # a local file's tensors tile its data buffer exactly
    shards = [os.path.basename(h.path) for h in files.headers]
    base = {s: os.path.basename(s) for s in set(wm.values()) if isinstance(s, str)} if not files.index_matches else {}
    # each header's names, once: a local shard's header is read again for them (load() keeps no names)
    names = [] if files.index_matches else [h.tensor_names() for h in files.headers]
    # Nothing missing, extra or moved: load() saw every header's tensors indexed to that header's shard, or,
    # checked here in C, every header's tensors are indexed to that header's shard (so no name is in two
    # headers of different file names) and the index lists as many names
    if files.index_matches or len(set(shards)) == len(shards) and sum(h.count for h in files.headers) \
            == len(wm) and all({base.get(s, s) for s in set(map(wm.get, hn))} <= {shard}
                               for hn, shard in zip(names, shards)):
        missing: list[str] = []
        extra: list[str] = []
        moved: list[str] = []
    else:
        where: dict[str, str] = {}
        for hn, shard in zip(names, shards):
            where.update(dict.fromkeys(hn, shard))
        missing = [n for n in wm if n not in where]
        extra = [n for n in where if n not in wm]
        moved = [n for n, s in wm.items() if n in where and base.get(s, s) != where[n]]
    out = []
    if missing or extra or moved:
        parts = []
        if missing:
            parts.append(f"{len(missing)} indexed tensor(s) absent from the shards (e.g. {missing[0]})")
        if extra:
            parts.append(f"{len(extra)} tensor(s) in the shards but not in the index (e.g. {extra[0]})")
        if moved:
            parts.append(f"{len(moved)} tensor(s) in a different shard than indexed (e.g. {moved[0]})")
        out.append(Finding("index-header-mismatch", "error", "; ".join(parts),
                           modules=tuple((missing + extra + moved)[:50])))
    declared = (files.index.get("metadata") or {}).get("total_size")
    if isinstance(declared, int) and declared != total and not missing:
        out.append(Finding("index-total-size-mismatch", "warn",
                           f"index metadata.total_size is {declared} bytes but the shard headers hold {total}"))
    return out


def _kv_checks(files, plan) -> list[Finding]:
    if plan.kv_cache:
        return []
    kv_tensors = [n for h in files.headers for n in h.kv_names]
    if kv_tensors:
        return [Finding("kv-scales-undeclared", "info",
                        f"{len(kv_tensors)} KV-cache scale tensors present but the config declares no KV-cache "
                        "quantization", modules=tuple(kv_tensors[:10]))]
    return []


def arch_number_checks(config: dict | None) -> list[Finding]:
    if not isinstance(config, dict):
        return []
    return [Finding("invalid-arch-config", "error",
                    f"config.json: {key} is {_show(v)}: must be a positive integer; treated as unknown, "
                    "figures that need it show N/A")
            for key, v in invalid_numbers(config)]


def _show(v) -> str:
    if isinstance(v, float) and v != v:
        return "NaN"
    return repr(v) if isinstance(v, str) else str(v).replace("None", "null")


def _layer_checks(arch: ArchInfo, mods, config: dict | None = None, experts: int | None = None) -> list[Finding]:
    out = []
    if arch.moe:
        seen = experts if experts is not None else experts_per_layer(mods)
        if seen and seen != arch.moe.num_experts:
            out.append(Finding("expert-count-mismatch", "info",
                               f"config declares {arch.moe.num_experts} experts per MoE layer, the tensors hold "
                               f"{seen} (expert-pruned checkpoint?): active bytes use {seen}"))
    # the distinct (role, layer) pairs, in one C pass over the rows (a 100k-tensor MoE has ~25k rows, ~200 pairs)
    pairs = set(zip(map(_ROLE, mods), map(_LAYER_INDEX, mods)))
    layers = {layer for role, layer in pairs if layer is not None and role not in ("vision", "mtp")}
    if arch.num_layers and layers and max(layers) + 1 < arch.num_layers:
        out.append(Finding("missing-layers", "error",
                           f"config declares {arch.num_layers} layers but tensors cover only {max(layers) + 1}"))
    declared = text_config(config).get("num_hidden_layers") if isinstance(config, dict) else None
    # DeepSeek-style MTP layers sit at index >= num_hidden_layers and are allowed for
    layers = {layer for role, layer in pairs if layer is not None and role != "vision"}
    if layers and declared is not None and max(layers) + 1 > _pos(declared) + arch.mtp_layers:
        out.append(Finding("layer-count-mismatch", "warn",
                           f"config.json declares num_hidden_layers {_show(declared)} but the tensors hold "
                           f"{max(layers) + 1} decoder layers: the advisor counts the tensors' layers"))
    return out


def _dtype_check(files, groups: list[ModuleGroup]) -> list[Finding]:
    cfg = files.config or {}
    dt = cfg.get("torch_dtype") or cfg.get("dtype")
    if not files.headers or dt not in ("bfloat16", "float16"):
        return []
    want = "bf16" if dt == "bfloat16" else "fp16"
    other = "fp16" if want == "bf16" else "bf16"
    n_other = sum(g.stored_bytes for g in groups if g.weight.format == other)
    n_want = sum(g.stored_bytes for g in groups if g.weight.format == want)
    if n_other > n_want:
        return [Finding("dtype-mismatch", "info",
                        f"config says torch_dtype {dt} but the unquantized tensors are mostly {other}")]
    return []


def _w4a4(m: ModuleRow) -> bool:
    return m.tensors is not None and m.weight.format == "nvfp4" and m.act.format == "nvfp4" and m.count == 1


_INPUT_SCALE_SAMPLE = 64    # scalars read at most (4 bytes each): enough to tell a constant from calibration


def uncalibrated_input_scales(files, mods) -> list[Finding]:
    """W4A4 NVFP4 whose static activation scales are all exactly 1.0: not calibrated (a data-free
    converter, e.g. `nvfp4-advisor convert`, writes 1.0). Weight-only runtimes ignore input_scale;
    on FP4 tensor cores activations then get a global scale of 1, so small activation blocks fall
    into E4M3's subnormal range."""
    headers = {h.path: h for h in files.headers}
    cands = list(compress(mods, layout_flags(mods, _w4a4)))
    step = max(1, len(cands) // _INPUT_SCALE_SAMPLE)
    reads = []
    for m in cands[::step]:
        t = m.tensors.get("input_scale")        # a TensorEntry's fields, its suffix first (shards.ModuleTensor)
        h = headers.get(m.shard_of("input_scale")) if t is not None else None
        if t is None or h is None or t[1] != "F32" or _prod(t[2]) != 1:
            continue
        reads.append((h.path, 8 + h.header_size + t[3], m.name, "input_scale", 1.0))
    values = read_scalars(reads)
    if len(values) < 1 or any(v != 1.0 for v in values.values()):
        return []
    return [Finding("uncalibrated-input-scales", "warn",
                    f"input_scale is exactly 1.0 on all {len(values)} W4A4 module(s) read: activation scales "
                    "were not calibrated (a data-free conversion). Weight-only (W4A16) runtimes ignore them; "
                    "on FP4 tensor cores small activations lose precision",
                    modules=tuple(n for n, _ in list(values)[:20]))]
