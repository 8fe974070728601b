"""The GPU table: load profiles/gpus.yaml, validate it, and look GPUs up.

The YAML is validated with pydantic (extra keys forbidden) the first time it is loaded; any
problem becomes one ``BadInput`` naming the file and the first offending entry/field. pydantic
and yaml are imported only inside the loader so that ``nvfp4-advisor --help`` stays fast.

Lookups accept what people and NVML actually say: an id (``rtx-3090``), a marketing name, an
alias such as ``NVIDIA GeForce RTX 3090``, a PCI device id (``0x2204``). Name matching ignores
case, punctuation, token order and the ``NVIDIA``/``GeForce`` prefixes, and falls back to
ignoring memory-size tokens ("RTX 3060" -> "RTX 3060 12GB") when that leaves one candidate.
"""

from __future__ import annotations

from advisor.yamlio import parse_yaml

import difflib
import functools
import re
from pathlib import Path
from typing import Any, Iterable

from advisor.errors import BadInput, UsageError
from advisor.gpu_spec import NOT_SUPPORTED, PEAK_KEYS, GpuSpec

ARCHS = ("turing", "ampere", "ada", "hopper", "blackwell")
SEGMENTS = ("consumer", "workstation", "datacenter", "embedded")
CONFIDENCES = ("high", "medium", "low")

# Entry fields that may be flagged as derived/halved besides the peak keys.
_FLAGGABLE = PEAK_KEYS + ("sm_count", "boost_clock_mhz", "tensor_peak_clock_mhz", "l2_mb", "tdp_w",
                          "bandwidth_gbs", "memory_gb")


def default_path() -> Path:
    from profiles import PROFILES_DIR

    return PROFILES_DIR / "gpus.yaml"


# ---------------------------------------------------------------- schema (pydantic, lazy)
@functools.lru_cache(maxsize=1)
def _schema():
    """Build the pydantic models on first use (keeps pydantic out of light imports)."""
    from typing import Literal, Optional

    from pydantic import BaseModel, ConfigDict, Field, create_model, field_validator, model_validator

    strict = ConfigDict(extra="forbid")
    Num = Optional[float]

    class Source(BaseModel):
        model_config = strict
        title: str = Field(min_length=1)
        url: Optional[str] = None

    Peaks = create_model(  # every key explicit: a number, or null (unknown / not supported)
        "Peaks", __config__=strict, **{k: (Optional[float], Field(ge=0)) for k in PEAK_KEYS}
    )

    class Entry(BaseModel):
        model_config = strict
        id: str = Field(pattern=r"^[a-z0-9][a-z0-9.-]*$")
        name: str = Field(min_length=1)
        aliases: list[str] = []
        pci_device_ids: list[str] = []
        segment: Literal[SEGMENTS]  # type: ignore[valid-type]
        arch: Literal[ARCHS]  # type: ignore[valid-type]
        compute_capability: str = Field(strict=True, pattern=r"^\d{1,2}\.\d$")
        sm_count: Optional[int] = Field(default=None, gt=0)
        boost_clock_mhz: Num = Field(default=None, gt=0)
        tensor_peak_clock_mhz: Num = Field(default=None, gt=0)
        memory_gb: Num = Field(default=None, gt=0)
        memory_type: Optional[str] = None
        bandwidth_gbs: Num = Field(default=None, gt=0)
        l2_mb: Num = Field(default=None, gt=0)
        tdp_w: Num = Field(default=None, gt=0)
        nvlink_gbs: Num = Field(default=None, gt=0)   # null: no NVLink
        pcie_gen: Optional[int] = Field(default=None, ge=1, le=7)
        pcie_lanes: Optional[int] = Field(default=None, ge=1, le=32)
        dense_tensor_peak: Peaks  # type: ignore[valid-type]
        not_supported: list[Literal[PEAK_KEYS]] = []  # type: ignore[valid-type]
        derived_fields: list[Literal[_FLAGGABLE]] = []  # type: ignore[valid-type]
        halved_from_sparse: list[Literal[PEAK_KEYS]] = []  # type: ignore[valid-type]
        confidence: Literal[CONFIDENCES]  # type: ignore[valid-type]
        sources: list[str] = Field(min_length=1)
        notes: str = ""

        @field_validator("compute_capability")
        @classmethod
        def _cc_range(cls, v: str) -> str:
            major = int(v.split(".")[0])
            if not 7 <= major <= 12:
                raise ValueError(f"compute capability {v} is outside Turing..Blackwell (7.x-12.x)")
            return v

        @field_validator("pci_device_ids")
        @classmethod
        def _pci(cls, v: list[str]) -> list[str]:
            for d in v:
                if not re.fullmatch(r"0x[0-9A-F]{4}", d):
                    raise ValueError(f"PCI device id {d!r} must look like 0x2204 (4 upper-case hex digits)")
            return v

        @model_validator(mode="after")
        def _flags(self):
            peaks = self.dense_tensor_peak.model_dump()
            for k in self.not_supported:
                if peaks[k] is not None:
                    raise ValueError(f"{k} is listed as not supported but has a peak ({peaks[k]})")
                if k in self.derived_fields or k in self.halved_from_sparse:
                    raise ValueError(f"{k} is not supported yet flagged derived/halved")
            for k in self.halved_from_sparse:
                if peaks[k] is None:
                    raise ValueError(f"{k} is flagged halved_from_sparse but has no value")
            return self

    class Table(BaseModel):
        model_config = strict
        sources: dict[str, Source]
        gpus: list[Entry] = Field(min_length=1)

    return Table


# ---------------------------------------------------------------- loading
def _first_error(err, data: Any) -> str:
    """'gpus[3] (rtx-3090).sm_count: Input should be ...' from a pydantic ValidationError."""
    e = err.errors()[0]
    loc = list(e.get("loc", ()))
    parts: list[str] = []
    if len(loc) >= 2 and loc[0] == "gpus" and isinstance(loc[1], int):
        ident = ""
        try:
            ident = f" ({data['gpus'][loc[1]]['id']})"
        except (KeyError, IndexError, TypeError):
            pass
        parts.append(f"gpus[{loc[1]}]{ident}")
        loc = loc[2:]
    parts.extend(str(p) for p in loc)
    where = ".".join(parts) or "top level"
    msg = str(e.get("msg", "invalid")).removeprefix("Value error, ")
    if e.get("type") == "extra_forbidden":
        msg = "unknown key (extra keys are not allowed)"
    elif loc and loc[-1] == "compute_capability" and e.get("type") == "string_type":
        msg += ' (write it quoted, e.g. "8.6")'
    elif e.get("type") == "missing":
        msg = "required key is missing"
    return f"{where}: {msg}"


def _to_spec(e) -> GpuSpec:
    raw = e.dense_tensor_peak.model_dump()
    peaks = {k: (NOT_SUPPORTED if k in e.not_supported else raw[k]) for k in PEAK_KEYS}
    major, minor = (int(x) for x in e.compute_capability.split("."))
    return GpuSpec(
        id=e.id, name=e.name, arch=e.arch, cc=(major, minor), sm_count=e.sm_count,
        boost_clock_mhz=e.boost_clock_mhz, memory_gb=e.memory_gb, memory_type=e.memory_type,
        bandwidth_gbs=e.bandwidth_gbs, l2_mb=e.l2_mb, tdp_w=e.tdp_w, nvlink_gbs=e.nvlink_gbs,
        peaks=peaks, aliases=tuple(e.aliases), pci_device_ids=tuple(e.pci_device_ids),
        segment=e.segment, tensor_peak_clock_mhz=e.tensor_peak_clock_mhz, pcie_gen=e.pcie_gen,
        pcie_lanes=e.pcie_lanes, confidence=e.confidence, derived=False,
        derived_fields=tuple(e.derived_fields), halved_from_sparse=tuple(e.halved_from_sparse),
        sources=tuple(e.sources), notes=e.notes,
    )


def _check_table(table) -> str | None:
    """Cross-entry rules pydantic cannot express per entry. Returns the first problem."""
    seen_ids: set[str] = set()
    seen_pci: dict[str, str] = {}
    seen_names: dict[frozenset, str] = {}
    for i, e in enumerate(table.gpus):
        where = f"gpus[{i}] ({e.id})"
        if e.id in seen_ids:
            return f"{where}: duplicate id"
        seen_ids.add(e.id)
        for d in e.pci_device_ids:
            if d in seen_pci:
                return f"{where}: PCI device id {d} already used by {seen_pci[d]}"
            seen_pci[d] = e.id
        for n in (e.name, *e.aliases):
            key = _tokens(n)
            if key in seen_names and seen_names[key] != e.id:
                return f"{where}: name/alias {n!r} already used by {seen_names[key]}"
            seen_names[key] = e.id
        for s in e.sources:
            if s not in table.sources:
                return f"{where}: source {s!r} is not defined in the top-level sources map"
    return None


# ---------------------------------------------------------------- validated-table cache
# Building the pydantic schema costs ~0.15 s of every cold start (plan, explain, the TUI). A table
# that validated once is stored as plain JSON in the user cache dir, keyed by the file's bytes and
# the advisor version: an edited table, or a new advisor, is validated again.
_TUPLE_FIELDS = ("cc", "aliases", "pci_device_ids", "derived_fields", "halved_from_sparse", "sources")


def _cache_file(raw: bytes) -> Path:
    import hashlib

    import platformdirs

    from advisor import __version__

    key = hashlib.sha1(raw + __version__.encode()).hexdigest()[:20]
    return Path(platformdirs.user_cache_dir("nvfp4-advisor")) / "validated" / f"gpus-{key}.json"


def _spec_from_json(d: dict) -> GpuSpec:
    d = dict(d)
    for k in _TUPLE_FIELDS:
        d[k] = tuple(d[k])
    d["peaks"] = {k: NOT_SUPPORTED if v == "not-supported" else v for k, v in d["peaks"].items()}
    return GpuSpec(**d)


def _read_cache(raw: bytes):
    import json

    try:
        data = json.loads(_cache_file(raw).read_text(encoding="utf-8"))
        return tuple(_spec_from_json(d) for d in data["gpus"]), data["sources"]
    except (OSError, ValueError, KeyError, TypeError):
        return None                      # absent or unreadable: validate the YAML instead


def _write_cache(raw: bytes, specs, sources) -> None:
    import dataclasses
    import json
    import os
    import tempfile

    from advisor.jsonout import to_jsonable

    target = _cache_file(raw)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        gpus = [to_jsonable({f.name: getattr(s, f.name) for f in dataclasses.fields(s)}) for s in specs]
        fd, tmp = tempfile.mkstemp(dir=target.parent, suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump({"gpus": gpus, "sources": sources}, fh)
        os.replace(tmp, target)
    except OSError:
        pass                             # a read-only cache dir only costs speed


@functools.lru_cache(maxsize=16)
def _load_cached(path: str, _mtime_ns: int) -> tuple[tuple[GpuSpec, ...], dict[str, dict]]:
    try:
        raw = Path(path).read_bytes()
    except OSError as err:
        raise BadInput(f"cannot read GPU table: {err.strerror or err}", path=path) from None
    cached = _read_cache(raw)
    if cached is not None:
        return cached
    specs, sources = _validate(path, raw)
    _write_cache(raw, specs, sources)
    return specs, sources


def _validate(path: str, raw: bytes) -> tuple[tuple[GpuSpec, ...], dict[str, dict]]:
    from pydantic import ValidationError

    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise BadInput(f"GPU table is not UTF-8: {err.reason}", path=path) from None
    data = parse_yaml(text, path, "GPU table")
    if not isinstance(data, dict):
        raise BadInput("GPU table must be a mapping with 'sources' and 'gpus'", path=path)
    try:
        table = _schema().model_validate(data)
    except ValidationError as err:
        raise BadInput(_first_error(err, data), path=path) from None
    problem = _check_table(table)
    if problem:
        raise BadInput(problem, path=path)
    sources = {k: v.model_dump() for k, v in table.sources.items()}
    return tuple(_to_spec(e) for e in table.gpus), sources


def _resolve(path: str | Path | None) -> str:
    p = Path(path) if path is not None else default_path()
    return str(p.resolve())


def _mtime(path: str) -> int:
    try:
        return Path(path).stat().st_mtime_ns
    except OSError:
        return -1


def load_gpu_table(path: str | Path | None = None) -> tuple[GpuSpec, ...]:
    """All GPUs of the table, in file order. Validated once per file version (cached)."""
    p = _resolve(path)
    return _load_cached(p, _mtime(p))[0]


def load_sources(path: str | Path | None = None) -> dict[str, dict]:
    """The table's top-level ``sources`` map: key -> {"title", "url"}."""
    p = _resolve(path)
    return dict(_load_cached(p, _mtime(p))[1])


# ---------------------------------------------------------------- lookups
WHAT_IF_GPU = "rtx-3090"     # planned for when no card is probed and none is named (TUI, piped answer, plan)

_DROP = {"nvidia", "geforce"}
_MEM = re.compile(r"^\d+(\.\d+)?(gb|gib|g)$")


def _tokens(name: str) -> frozenset[str]:
    """Order-free normal form: 'NVIDIA A100-SXM4-80GB' == 'A100 80GB SXM4'."""
    s = name.lower()
    s = re.sub(r"(\d)\s+(gb|gib)\b", r"\1\2", s)      # "80 GB" -> "80gb"
    s = re.sub(r"[^a-z0-9.]+", " ", s)
    return frozenset(t for t in s.split() if t not in _DROP)


def _no_mem(tokens: frozenset[str]) -> frozenset[str]:
    return frozenset(t for t in tokens if not _MEM.match(t))


def _names(spec: GpuSpec) -> Iterable[str]:
    yield spec.name
    yield from spec.aliases


_FAMILY = ("nvidia", "geforce", "tesla", "rtx")     # words people leave out: "3090" is the RTX 3090


def _compact(text: str) -> str:
    """Spacing, dashes and case dropped: 'RTX3090', 'rtx 3090' and 'rtx-3090' are one spelling."""
    return re.sub(r"[^a-z0-9]+", "", text.lower())


def _short_forms(spec: GpuSpec) -> set[str]:
    """The compact id, name and aliases, each also without its leading family words."""
    out = set()
    for text in (spec.id, *_names(spec)):
        words = re.sub(r"[^a-z0-9]+", " ", text.lower()).split()
        out.add("".join(words))
        while words and words[0] in _FAMILY:
            words = words[1:]
            if words:
                out.add("".join(words))
    return out


def get_gpu(id_or_name: str, path: str | Path | None = None) -> GpuSpec:
    """A table entry by id, name or alias (case-insensitive; spacing, dashes and the family word may
    be left out when that names one card: RTX3090, 3090). UsageError with close matches."""
    table = load_gpu_table(path)
    want = id_or_name.strip().lower()
    for spec in table:
        if spec.id == want or any(n.lower() == want for n in _names(spec)):
            return spec
    found = find_by_name(id_or_name, path=path)
    if found is not None:
        return found
    short = _compact(want)
    hits = [spec for spec in table if short and short in _short_forms(spec)]
    if len(hits) == 1:
        return hits[0]
    # ids whose spellings contain what was typed ("h100" -> h100-sxm, h100-pcie); difflib only without any
    ids = [spec.id for spec in hits] or [spec.id for spec in table if short and any(short in f for f in _short_forms(spec))]
    if not ids:
        choices = {spec.id: spec.id for spec in table}
        choices.update({n.lower(): spec.id for spec in table for n in _names(spec)})
        ids = [choices[c] for c in difflib.get_close_matches(want, list(choices), n=5, cutoff=0.5)]
    ids = list(dict.fromkeys(ids))[:5]
    hint = f"; close matches: {', '.join(ids)}" if ids else ""
    raise UsageError(f"unknown GPU {id_or_name!r}{hint} (see `nvfp4-advisor gpus`)")


def _norm_devid(devid: int | str) -> str | None:
    """0x2204 / '0x2204' / '2204' / NVML pciDeviceId 0x220410DE -> '0x2204'."""
    if isinstance(devid, str):
        s = devid.strip().lower()
        s = s[2:] if s.startswith("0x") else s
        try:
            value = int(s, 16)
        except ValueError:
            return None
    else:
        value = int(devid)
    if value > 0xFFFF:  # NVML packs (device << 16) | vendor
        value >>= 16
    return f"0x{value:04X}"


def find_by_pci_device_id(devid: int | str, path: str | Path | None = None) -> GpuSpec | None:
    """Entry whose PCI device id matches (accepts NVML's packed pciDeviceId too)."""
    key = _norm_devid(devid)
    if key is None:
        return None
    for spec in load_gpu_table(path):
        if key in spec.pci_device_ids:
            return spec
    return None


def find_by_name(nvml_name: str, path: str | Path | None = None, memory_gb: float | None = None) -> GpuSpec | None:
    """Entry matching an NVML/marketing name, or None.

    Exact token match first; then ignoring memory-size tokens, accepted only when it leaves a
    single candidate. ``memory_gb`` (NVML total memory) rejects candidates more than 20 % off,
    so e.g. an unlisted 8 GB variant is not taken for the 16 GB entry.
    """
    table = load_gpu_table(path)
    want = _tokens(nvml_name)
    if not want:
        return None

    def mem_ok(spec: GpuSpec) -> bool:
        if memory_gb is None or spec.memory_gb is None:
            return True
        return abs(memory_gb - spec.memory_gb) <= 0.2 * spec.memory_gb

    for spec in table:
        if any(_tokens(n) == want for n in _names(spec)) and mem_ok(spec):
            return spec
    loose = _no_mem(want)
    hits = [s for s in table if any(_no_mem(_tokens(n)) == loose for n in _names(s)) and mem_ok(s)]
    return hits[0] if len(hits) == 1 else None


def parse_cc(value: str | tuple[int, int]) -> tuple[int, int]:
    """'8.9' / 'sm_89' / '89' / (8, 9) -> (8, 9). UsageError on anything else."""
    if isinstance(value, tuple):
        return value
    s = str(value).strip().lower().removeprefix("sm_").rstrip("af")
    m = re.fullmatch(r"(\d{1,2})\.(\d)", s) or re.fullmatch(r"(\d{1,2})(\d)", s)
    if not m:
        raise UsageError(f"bad compute capability {value!r}: use X.Y, e.g. 8.9")
    return int(m.group(1)), int(m.group(2))


def filter_gpus(arch: str | None = None, cc_min: str | tuple[int, int] | None = None,
                cc_max: str | tuple[int, int] | None = None, segment: str | None = None,
                path: str | Path | None = None) -> tuple[GpuSpec, ...]:
    """Table entries matching every given filter (inclusive cc bounds), in file order."""
    if arch is not None and arch.lower() not in ARCHS:
        raise UsageError(f"unknown architecture {arch!r}; choose from {', '.join(ARCHS)}")
    if segment is not None and segment.lower() not in SEGMENTS:
        raise UsageError(f"unknown segment {segment!r}; choose from {', '.join(SEGMENTS)}")
    lo = parse_cc(cc_min) if cc_min is not None else None
    hi = parse_cc(cc_max) if cc_max is not None else None
    out = []
    for spec in load_gpu_table(path):
        if arch is not None and spec.arch != arch.lower():
            continue
        if segment is not None and spec.segment != segment.lower():
            continue
        if lo is not None and spec.cc < lo:
            continue
        if hi is not None and spec.cc > hi:
            continue
        out.append(spec)
    return tuple(out)
