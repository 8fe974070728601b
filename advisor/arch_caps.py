"""Tensor-core capabilities per compute capability, as data (profiles/arch.yaml).

The kernel-path rules ask one question per layer: "which MMA instruction class can this GPU
issue for these inputs?" ``caps_for((9, 0)).mma_for("bf16")`` answers ``"wgmma_bf16"``; ``None``
means the tensor cores lack the format. Every answer has a source: ``caps.source_for("bf16")``.

Unknown compute capabilities: a newer minor of a known major (e.g. 12.2) takes the nearest
lower known record of that major and is marked ``exact=False``; anything else gets no MMA at
all (``known=False``) rather than a guess.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Mapping

from advisor.errors import BadInput
from advisor.gpu_spec import ARCHS
from advisor.kernel_path.model import MMA_CLASSES
from advisor.yamlio import load_yaml_file

# Input formats the table answers for (see the header of profiles/arch.yaml).
FORMATS = ("f16", "bf16", "int8", "int4", "e4m3", "nvfp4", "mxfp4")
_ARCH_KEYS = {"cc", "arch", "arch_specific", "products", "instructions", "block_scaled_kinds",
              "sparse_2_4", "mma", "fact_sources", "notes"}
# Aliases callers may use for a format.
_FORMAT_ALIASES = {"fp16": "f16", "fp8": "e4m3", "fp8_e4m3": "e4m3", "fp4": "nvfp4", "s8": "int8",
                   "s4": "int4", "w4a4-nvfp4": "nvfp4"}


@dataclass(frozen=True)
class ArchCaps:
    cc: tuple[int, int]
    arch: str                                 # turing | ampere | ada | hopper | blackwell | unknown
    target: str                               # sm_XY
    arch_specific_target: str | None          # sm_XYa when wgmma/tcgen05/FP4 kinds need it
    mma: Mapping[str, str | None]             # format -> MMA class (MMA_CLASSES) or None
    sources: Mapping[str, str]                # format -> "KEY: title (url)"
    instructions: tuple[str, ...] = ()
    block_scaled_kinds: tuple[str, ...] = ()
    sparse_2_4: bool = False
    products: str = ""
    notes: str = ""
    known: bool = True                        # False: no record for this major (no MMA assumed)
    exact: bool = True                        # False: borrowed from the nearest lower minor
    matched_cc: tuple[int, int] | None = None  # the record's cc used

    def mma_for(self, fmt: str) -> str | None:
        """MMA class for an input format (f16, bf16, int8, int4, e4m3/fp8, nvfp4/fp4, mxfp4)."""
        return self.mma.get(_norm_format(fmt))

    def source_for(self, fmt: str) -> str:
        return self.sources.get(_norm_format(fmt), "")

    @property
    def has_bf16(self) -> bool:
        return self.mma_for("bf16") is not None

    @property
    def has_fp8_mma(self) -> bool:
        return self.mma_for("e4m3") is not None

    @property
    def has_fp4_mma(self) -> bool:
        return self.mma_for("nvfp4") is not None

    @property
    def has_int4_mma(self) -> bool:
        return self.mma_for("int4") is not None


def _norm_format(fmt: str) -> str:
    f = fmt.strip().lower()
    f = _FORMAT_ALIASES.get(f, f)
    if f not in FORMATS:
        raise KeyError(f"unknown input format {fmt!r}; choose from {', '.join(FORMATS)}")
    return f


def default_path() -> Path:
    from profiles import PROFILES_DIR

    return PROFILES_DIR / "arch.yaml"


@functools.lru_cache(maxsize=1)
def _default_resolved() -> str:
    """default_path() resolved once: caps_for runs ~200 times in one plan (realpath each time was 4 ms)."""
    return str(default_path().resolve())


def _parse_cc(text: str, where: str, path: str) -> tuple[int, int]:
    m = re.fullmatch(r"(\d{1,2})\.(\d)", text) if isinstance(text, str) else None
    if not m:
        raise BadInput(f"{where}: compute capability {text!r} must be a string 'X.Y'", path=path)
    return int(m.group(1)), int(m.group(2))


def _validate(data: object, path: str) -> tuple[dict[str, str], list[dict]]:
    """Hand-rolled checks (the file is small and fixed-shape); first problem -> BadInput."""
    if not isinstance(data, dict) or set(data) != {"sources", "archs"}:
        raise BadInput("arch table must be a mapping with exactly 'sources' and 'archs'", path=path)
    sources: dict[str, str] = {}
    for key, src in (data["sources"] or {}).items():
        if not isinstance(src, dict) or not isinstance(src.get("title"), str) or set(src) - {"title", "url"}:
            raise BadInput(f"sources.{key}: needs a 'title' string and an optional 'url'", path=path)
        sources[key] = f"{key}: {src['title']}" + (f" ({src['url']})" if src.get("url") else "")
    records = data["archs"]
    if not isinstance(records, list) or not records:
        raise BadInput("archs: must be a non-empty list", path=path)
    seen: set[tuple[int, int]] = set()
    for i, rec in enumerate(records):
        where = f"archs[{i}]"
        if not isinstance(rec, dict):
            raise BadInput(f"{where}: must be a mapping", path=path)
        unknown = set(rec) - _ARCH_KEYS
        missing = _ARCH_KEYS - set(rec)
        if unknown:
            raise BadInput(f"{where}.{sorted(unknown)[0]}: unknown key (extra keys are not allowed)", path=path)
        if missing:
            raise BadInput(f"{where}.{sorted(missing)[0]}: missing", path=path)
        if not isinstance(rec["cc"], list) or not rec["cc"]:
            raise BadInput(f"{where}.cc: must be a non-empty list of 'X.Y' strings", path=path)
        for cc_text in rec["cc"]:
            cc = _parse_cc(cc_text, where, path)
            if cc in seen:
                raise BadInput(f"{where}: compute capability {cc_text} listed twice", path=path)
            seen.add(cc)
        types = {"arch": str, "products": str, "notes": str, "arch_specific": bool, "sparse_2_4": bool,
                 "instructions": list, "block_scaled_kinds": list}
        for key, typ in types.items():
            if not isinstance(rec[key], typ):
                raise BadInput(f"{where}.{key}: must be a {typ.__name__}", path=path)
        if rec["arch"] not in ARCHS:
            raise BadInput(f"{where}.arch: {rec['arch']!r} is not one of {', '.join(ARCHS)}", path=path)
        for part in ("mma", "fact_sources"):
            if not isinstance(rec[part], dict) or set(rec[part]) != set(FORMATS):
                raise BadInput(f"{where}.{part}: must give exactly {', '.join(FORMATS)}", path=path)
        for fmt, cls in rec["mma"].items():
            if cls is not None and cls not in MMA_CLASSES:
                raise BadInput(f"{where}.mma.{fmt}: {cls!r} is not an MMA class of kernel_path.model", path=path)
        for fmt, key in rec["fact_sources"].items():
            if key not in sources:
                raise BadInput(f"{where}.fact_sources.{fmt}: source {key!r} is not defined", path=path)
    return sources, records


@functools.lru_cache(maxsize=8)
def _load(path: str, _mtime_ns: int) -> tuple[dict[tuple[int, int], tuple[dict, tuple[int, int]]], dict[str, str]]:
    data = load_yaml_file(path, "arch table")
    sources, records = _validate(data, path)
    by_cc: dict[tuple[int, int], tuple[dict, tuple[int, int]]] = {}
    for rec in records:
        for cc_text in rec["cc"]:
            cc = _parse_cc(cc_text, "", path)
            by_cc[cc] = (rec, cc)
    return by_cc, sources


def _build(cc: tuple[int, int], rec: dict, matched: tuple[int, int], sources: dict[str, str], exact: bool) -> ArchCaps:
    target = f"sm_{cc[0]}{cc[1]}"
    return ArchCaps(
        cc=cc, arch=rec["arch"], target=target,
        arch_specific_target=f"{target}a" if rec["arch_specific"] else None,
        mma=MappingProxyType(dict(rec["mma"])),
        sources=MappingProxyType({f: sources[k] for f, k in rec["fact_sources"].items()}),
        instructions=tuple(rec["instructions"]), block_scaled_kinds=tuple(rec["block_scaled_kinds"]),
        sparse_2_4=bool(rec["sparse_2_4"]), products=rec["products"], notes=rec["notes"],
        known=True, exact=exact, matched_cc=matched,
    )


def caps_for(cc: tuple[int, int], path: str | Path | None = None) -> ArchCaps:
    """Capabilities for a compute capability such as (8, 9)."""
    p = str(Path(path).resolve()) if path is not None else _default_resolved()
    try:
        mtime = Path(p).stat().st_mtime_ns
    except OSError:
        mtime = -1
    by_cc, sources = _load(p, mtime)
    cc = (int(cc[0]), int(cc[1]))
    if cc in by_cc:
        rec, matched = by_cc[cc]
        return _build(cc, rec, matched, sources, exact=True)
    lower = [k for k in by_cc if k[0] == cc[0] and k[1] < cc[1]]
    if lower:
        rec, matched = by_cc[max(lower)]
        return _build(cc, rec, matched, sources, exact=False)
    none = MappingProxyType({f: None for f in FORMATS})
    why = f"compute capability {cc[0]}.{cc[1]} is not in profiles/arch.yaml: no tensor-core MMA assumed"
    return ArchCaps(cc=cc, arch="unknown", target=f"sm_{cc[0]}{cc[1]}", arch_specific_target=None, mma=none,
                    sources=MappingProxyType({f: why for f in FORMATS}), notes=why, known=False, exact=False)
