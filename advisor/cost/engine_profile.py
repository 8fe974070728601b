"""Engine memory profiles (profiles/engine_memory/<engine>-<version>.yaml): memory share, the memory
terms the engine holds besides the KV cache, KV dtypes, per-step overheads, speculative decoding.

Versioned like the rule files: a version without its own profile uses the nearest older one.
Loaded at the edge into frozen records; the cost functions receive them as arguments.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from advisor import engines
from advisor.cost.kv import KvDtype
from advisor.cost.memory_terms import BUDGET_OF, TERM_NAMES
from advisor.engines.versions import MEMORY_PROFILES, file_versions, resolve
from advisor.errors import BadInput
from advisor.yamlio import load_yaml_file

GIB = 1024 ** 3
# KV labels explain reports -> kind (engines spell the same dtype differently)
_KV_LABEL_KIND = {"bf16": "bf16", "bfloat16": "bf16", "fp16": "fp16", "float16": "fp16", "half": "fp16",
                  "fp8": "fp8", "fp8_e4m3": "fp8", "fp8_e5m2": "fp8", "nvfp4": "nvfp4", "fp4_e2m1": "nvfp4",
                  "int8": "int8", "int4": "int4"}
MIB = 1024 ** 2


@dataclass(frozen=True)
class EngineMemory:
    engine: str
    version: str
    share_flag: str
    share_default: float | None          # None: computed (SGLang auto)
    share_covers: str                    # all | weights_kv
    share_source: str
    max_batch_flag: str
    chunked_flag: str
    batch_defaults: tuple[dict, ...]     # vLLM/FastLLM tiers
    memory_tiers: tuple[dict, ...]       # SGLang tiers
    reserve: dict[str, Any]
    cuda_graphs_default: bool
    cuda_graphs_source: str
    kv_flag: str
    kv_source: str
    kv_dtypes: tuple[KvDtype, ...]
    kv_tune: tuple[str, ...]             # dtypes the tuner considers
    overhead: dict[str, Any]
    allreduce_per_layer: int
    allreduce_source: str
    spec_methods: tuple[str, ...] = ()
    spec_source: str = ""
    draft_kv_source: str = ""            # where the MTP draft layers' KV lives (the same pool)
    swa_full_tokens_ratio: float | None = None   # split full/window pool (SGLang); None: window-capped
    swa_source: str = ""
    recurrent: dict[str, Any] = field(default_factory=dict)   # recurrent_state: GDN/Mamba state rules
    memory: dict[str, Any] = field(default_factory=dict)      # budget + terms (advisor.cost.memory)
    acceptance: dict[str, Any] = field(default_factory=dict)  # what its spec-decode log prints
    draft_token_flag: dict[str, Any] = field(default_factory=dict)
    draft_quant: dict[str, Any] = field(default_factory=dict)  # quantized draft head (FastLLM)
    state_commit: dict[str, Any] = field(default_factory=dict)  # copy of the accepted GDN/Mamba state
    spec_batching: dict[str, Any] = field(default_factory=dict)  # how speculative requests share a batch
    prefix_cache: dict[str, Any] = field(default_factory=dict)
    chat_template_flag: str = ""
    profile_version: str = ""            # the profile file's version (nearest older than the engine's)
    version_note: str = ""               # set when the profile is not the asked-for version's own

    def kv_dtype(self, name: str) -> KvDtype | None:
        """The engine's dtype by flag value, or by the label `explain` reports (bf16, fp8_e4m3, ...)."""
        for dt in self.kv_dtypes:
            if dt.name == name:
                return dt
        kind = _KV_LABEL_KIND.get(name)
        return self.kv_of_kind(kind) if kind else None

    def kv_of_kind(self, kind: str) -> KvDtype | None:
        """The first explicit flag value of that kind ("auto" follows the checkpoint, so never)."""
        for dt in self.kv_dtypes:
            if dt.kind == kind and dt.name != "auto":
                return dt
        return None

    def sglang_tier(self, vram_gib: float) -> dict | None:
        for tier in self.memory_tiers:
            if vram_gib < tier["below_gib"]:
                return tier
        return None

    def batch_default(self, vram_gib: float, gpu_id: str) -> dict:
        for tier in self.batch_defaults:
            if vram_gib >= tier.get("min_gib", 0) and not any(x in gpu_id for x in tier.get("exclude", ())):
                return tier
        tier = self.sglang_tier(vram_gib) or {}
        return {"max_batch": tier.get("graph_max_bs", 64), "chunked_prefill": tier.get("chunked_prefill", 4096)}


def profiles_dir() -> Path:
    from profiles import PROFILES_DIR

    return PROFILES_DIR / "engine_memory"


def available_versions(engine: str, folder: Path | None = None) -> list[str]:
    return file_versions(_family(engine), folder or profiles_dir())


def resolve_version(engine: str, requested: str | None, folder: Path | None = None) -> tuple[str, str]:
    """The profile version for ``requested`` (None: the newest) and a note when it is another's
    (0.33.0 is served by 0.33 without one: advisor.engines.versions.MEMORY_PROFILES)."""
    folder = folder or profiles_dir()
    return resolve(MEMORY_PROFILES, engine, requested, available_versions(engine, folder), folder)


def _family(engine: str) -> str:
    spec = engines.find(engine)
    return spec.memory_family if spec and spec.memory_family else engine


def _need(d: dict, key: str, path: Path, where: str) -> Any:
    if not isinstance(d, dict) or key not in d:
        raise BadInput(f"{where}: missing '{key}'", path=str(path))
    return d[key]


def _engine(name: str, e: dict, path: Path) -> EngineMemory:
    if not isinstance(e, dict):
        raise BadInput("an engine memory profile is a mapping (engine, version, memory_share, ...)", path=str(path))
    ms = _need(e, "memory_share", path, name)
    kvs = _need(e, "kv_cache_dtypes", path, name)
    dtypes = []
    for v in _need(kvs, "values", path, f"{name}.kv_cache_dtypes"):
        try:
            dtypes.append(KvDtype(str(v["name"]), str(v["kind"]), float(v["bits"]),
                                  float(v.get("scale_bytes_per_head", 0.0)),
                                  str(v.get("source", kvs.get("source", "")))))
        except (KeyError, TypeError, ValueError) as err:
            raise BadInput(f"{name}.kv_cache_dtypes: bad entry {v!r} ({err})", path=str(path)) from None
    default = ms.get("default")
    cg = _need(e, "cuda_graphs", path, name)
    return EngineMemory(
        engine=name, version=str(e.get("version", "")),
        share_flag=str(ms.get("flag", "")),
        share_default=None if default in (None, "auto") else float(default),
        share_covers=str(_need(ms, "covers", path, f"{name}.memory_share")),
        share_source=str(ms.get("source", "")),
        max_batch_flag=str(e.get("max_batch", {}).get("flag", "")),
        chunked_flag=str(e.get("chunked_prefill", {}).get("flag", "")),
        batch_defaults=tuple(e.get("batch_defaults", ())),
        memory_tiers=tuple(e.get("memory_tiers", ())),
        reserve=dict(e.get("reserve") or {}),
        cuda_graphs_default=bool(cg.get("default", True)),
        cuda_graphs_source=str(cg.get("source", "")),
        kv_flag=str(kvs.get("flag", "")), kv_source=str(kvs.get("source", "")),
        kv_dtypes=tuple(dtypes),
        kv_tune=tuple(str(v["name"]) for v in kvs["values"] if v.get("tune")),
        overhead=dict(_need(e, "step_overhead", path, name)),
        allreduce_per_layer=int(e.get("tp_allreduce_per_layer", 2)),
        allreduce_source=str(e.get("tp_source", "")),
        spec_methods=tuple(str(m) for m in e.get("speculative", {}).get("methods", ())),
        spec_source=str(e.get("speculative", {}).get("source", "")),
        draft_kv_source=str(e.get("speculative", {}).get("draft_kv_source", "")),
        swa_full_tokens_ratio=_swa_ratio(name, e.get("sliding_window_pool"), path),
        swa_source=str((e.get("sliding_window_pool") or {}).get("source", "")),
        recurrent=_recurrent(name, e.get("recurrent_state"), path),
        memory=_memory(name, e.get("memory"), path),
        acceptance=dict((e.get("speculative") or {}).get("acceptance") or {}),
        draft_token_flag=dict((e.get("speculative") or {}).get("draft_token_flag") or {}),
        draft_quant=dict((e.get("speculative") or {}).get("draft_quant") or {}),
        state_commit=_state_commit(name, (e.get("speculative") or {}).get("state_commit"), path),
        spec_batching=_positive_ints(name, "speculative.batching", (e.get("speculative") or {}).get("batching"),
                                     ("positions_max", "single_gpu_batch_max"), path),
        prefix_cache=dict(e.get("prefix_cache") or {}),
        chat_template_flag=str((e.get("chat_template") or {}).get("flag", "")),
    )


STATE_COMMIT_COPIES = ("none", "on_reject", "every_step")


def _state_commit(name: str, c: Any, path: Path) -> dict[str, Any]:
    """When the engine copies the accepted linear-attention state after verification (none: absent)."""
    if c is None:
        return {}
    where = f"{name}.speculative.state_commit"
    copy = _need(c, "copy", path, where)
    if copy not in STATE_COMMIT_COPIES:
        raise BadInput(f"{where}.copy must be one of {', '.join(STATE_COMMIT_COPIES)} (got {copy!r})", path=str(path))
    return _positive_ints(name, "speculative.state_commit", c, ("replay_above",), path)


def _positive_ints(name: str, what: str, d: Any, keys: tuple[str, ...], path: Path) -> dict[str, Any]:
    """A rule mapping whose ``keys``, where present, are whole numbers of at least 1."""
    if d is None:
        return {}
    if not isinstance(d, dict):
        raise BadInput(f"{name}.{what} must be a mapping", path=str(path))
    for k in keys:
        v = d.get(k)
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
            raise BadInput(f"{name}.{what}.{k} must be a whole number of at least 1 (got {v!r})", path=str(path))
    return dict(d)


def _swa_ratio(name: str, w: Any, path: Path) -> float | None:
    if w is None:
        return None
    where = f"{name}.sliding_window_pool"
    try:
        r = float(_need(w, "swa_full_tokens_ratio", path, where))
    except (TypeError, ValueError):
        raise BadInput(f"{where}.swa_full_tokens_ratio must be a number", path=str(path)) from None
    if not 0 < r <= 1:
        raise BadInput(f"{where}.swa_full_tokens_ratio must lie in (0, 1] (got {r:g})", path=str(path))
    return r


def _recurrent(name: str, r: Any, path: Path) -> dict[str, Any]:
    if r is None:
        return {}
    where = f"{name}.recurrent_state"
    if not isinstance(r, dict):
        raise BadInput(f"{where} must be a mapping", path=str(path))
    if _need(r, "pool", path, where) not in ("shared", "split"):
        raise BadInput(f"{where}.pool must be 'shared' or 'split' (got {r['pool']!r})", path=str(path))
    for key in ("slots_per_request", "conv_dtype", "ssm_dtype"):
        _need(r, key, path, where)
    if r["pool"] == "split":
        _need(r, "memory_ratio", path, where)
    return dict(r)


def _memory(name: str, m: Any, path: Path) -> dict[str, Any]:
    """The memory model: how the share becomes a budget, and the terms taken from it (validated here so
    a profile typo is one line naming the file, not a KeyError mid-plan)."""
    where = f"{name}.memory"
    if not isinstance(m, dict):
        raise BadInput(f"{where} must be a mapping with 'budget' and 'terms'", path=str(path))
    budget = _need(m, "budget", path, where)
    if _need(budget, "of", path, f"{where}.budget") not in BUDGET_OF:
        raise BadInput(f"{where}.budget.of must be one of {', '.join(BUDGET_OF)} (got {budget['of']!r})",
                       path=str(path))
    terms = _need(m, "terms", path, where)
    if not isinstance(terms, dict):
        raise BadInput(f"{where}.terms must be a mapping of term -> parameters", path=str(path))
    for term, params in terms.items():
        if term not in TERM_NAMES:
            raise BadInput(f"{where}.terms: unknown term {term!r} (known: {', '.join(TERM_NAMES)})", path=str(path))
        if not isinstance(params, dict) or not params.get("source"):
            raise BadInput(f"{where}.terms.{term} needs a 'source' (engine path:line@version or 'estimate: ...')",
                           path=str(path))
    return {"budget": dict(budget), "terms": {k: dict(v) for k, v in terms.items()}}


@functools.lru_cache(maxsize=16)
def _load_file(path_str: str, name: str) -> EngineMemory:
    path = Path(path_str)
    data = _extended(path, ())
    if data.get("engine") != name:
        raise BadInput(f"engine must be '{name}' (the file name says so), got {data.get('engine')!r}", path=path_str)
    return _engine(name, data, path)


# `extends: vllm-0.33` names a profile in the same folder: this file's keys replace the base's, mappings
# merged key by key at every depth (lists and values replace), so a new version writes only what changed.
_EXTENDS_NAME = re.compile(r"^[a-z0-9_]+-\d+(\.\d+)*$")


def _extended(path: Path, seen: tuple[Path, ...]) -> dict:
    data = load_yaml_file(path, "engine memory profile")
    if not isinstance(data, dict):
        raise BadInput("an engine memory profile is a mapping (engine, version, memory_share, ...)", path=str(path))
    base = data.get("extends")
    if base is None:
        return data
    if not isinstance(base, str) or not _EXTENDS_NAME.match(base):
        raise BadInput(f"extends must name a profile as <engine>-<version> (got {base!r})", path=str(path))
    nxt = path.with_name(f"{base}.yaml")
    if nxt == path or nxt in seen:
        raise BadInput(f"extends {base!r} comes back to a profile already in the chain", path=str(path))
    if not nxt.is_file():
        raise BadInput(f"extends {base!r}: no such profile next to this one", path=str(path))
    return _merged(_extended(nxt, seen + (path,)), {k: v for k, v in data.items() if k != "extends"})


def _merged(base: dict, patch: dict) -> dict:
    out = dict(base)
    for key, value in patch.items():
        out[key] = _merged(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def load_engine_memory(engine: str, version: str | None = None, *, folder: str | Path | None = None
                       ) -> EngineMemory:
    """The memory profile of ``engine`` at ``version`` (None: the newest; unknown: the nearest older)."""
    folder = Path(folder) if folder else profiles_dir()
    chosen, note = resolve_version(engine, version, folder)
    eng = _load_file(str(folder / f"{_family(engine)}-{chosen}.yaml"), engine)
    return replace(eng, profile_version=chosen, version_note=note)
