"""Engine memory defaults, reserves, KV dtypes and per-step overheads (profiles/engine_memory.yaml).

Loaded at the edge into frozen records; the cost functions receive them as arguments.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from advisor.cost.kv import KvDtype
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


def default_path() -> Path:
    from profiles import PROFILES_DIR

    return PROFILES_DIR / "engine_memory.yaml"


def _need(d: dict, key: str, path: Path, where: str) -> Any:
    if not isinstance(d, dict) or key not in d:
        raise BadInput(f"{where}: missing '{key}'", path=str(path))
    return d[key]


def _engine(name: str, e: dict, path: Path) -> EngineMemory:
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
        reserve=dict(_need(e, "reserve", path, name)),
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
    )


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


@functools.lru_cache(maxsize=8)
def _load(path_str: str) -> dict[str, EngineMemory]:
    path = Path(path_str)
    data = load_yaml_file(path, "engine memory profile")
    engines = _need(data, "engines", path, "top level")
    return {name: _engine(name, e, path) for name, e in engines.items()}


def load_engine_memory(engine: str, path: str | Path | None = None) -> EngineMemory:
    table = _load(str(path or default_path()))
    if engine not in table:
        raise BadInput(f"no memory profile for engine '{engine}' (have: {', '.join(sorted(table))})",
                       path=str(path or default_path()))
    return table[engine]
