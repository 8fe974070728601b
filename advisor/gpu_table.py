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

import functools
import re
from pathlib import Path
from typing import Iterable

from advisor.errors import BadInput, UsageError
from advisor.gpu_spec import NOT_SUPPORTED, GpuSpec
from advisor.gpu_table_schema import ARCHS, SEGMENTS, first_error, table_model, to_spec
from advisor.yamlio import parse_yaml


def default_path() -> Path:
    from profiles import PROFILES_DIR

    return PROFILES_DIR / "gpus.yaml"


# ---------------------------------------------------------------- loading
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

    from advisor import __version__
    from advisor.profile_cache import user_cache_dir

    key = hashlib.sha1(raw + __version__.encode()).hexdigest()[:20]
    return Path(user_cache_dir()) / "validated" / f"gpus-{key}.json"


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
        table = table_model().model_validate(data)
    except ValidationError as err:
        raise BadInput(first_error(err, data), path=path) from None
    problem = _check_table(table)
    if problem:
        raise BadInput(problem, path=path)
    sources = {k: v.model_dump() for k, v in table.sources.items()}
    return tuple(to_spec(e) for e in table.gpus), sources


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
    ids = [spec.id for spec in hits] or [spec.id for spec in table
                                         if short and any(short in f for f in _short_forms(spec))]
    if not ids:
        import difflib          # only for an id nothing else matched

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
