"""Workload profiles (profiles/workloads.yaml or a user file) as frozen records."""

from __future__ import annotations

from advisor.yamlio import load_yaml_file

import functools
from dataclasses import dataclass
from pathlib import Path

from advisor.errors import BadInput

OBJECTIVES = ("latency", "throughput", "context")


@dataclass(frozen=True)
class Workload:
    name: str
    description: str
    concurrency: int
    prompt_tokens: int
    output_tokens: int
    context_tokens: int
    objective: str
    min_stream_tok_s: float = 0.0
    speculative: bool = False


def default_path() -> Path:
    from profiles import PROFILES_DIR

    return PROFILES_DIR / "workloads.yaml"


def _positive_int(name: str, entry: dict, key: str, path: str) -> int:
    v = entry.get(key)
    if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
        raise BadInput(f"workload '{name}': '{key}' must be a positive integer (got {v!r})", path=path)
    return v


def _parse(name: str, e: object, path: str) -> Workload:
    if not isinstance(e, dict):
        raise BadInput(f"workload '{name}' must be a mapping", path=path)
    unknown = set(e) - {"description", "concurrency", "prompt_tokens", "output_tokens",
                        "context_tokens", "objective", "min_stream_tok_s", "speculative"}
    if unknown:
        raise BadInput(f"workload '{name}': unknown key(s) {', '.join(sorted(unknown))}", path=path)
    objective = e.get("objective", "throughput")
    if objective not in OBJECTIVES:
        raise BadInput(f"workload '{name}': objective must be one of {', '.join(OBJECTIVES)}", path=path)
    floor = e.get("min_stream_tok_s", 0)
    if not isinstance(floor, (int, float)) or floor < 0:
        raise BadInput(f"workload '{name}': min_stream_tok_s must be a number >= 0", path=path)
    prompt = _positive_int(name, e, "prompt_tokens", path)
    out = _positive_int(name, e, "output_tokens", path)
    ctx = e.get("context_tokens", prompt + out)
    if isinstance(ctx, bool) or not isinstance(ctx, int) or ctx <= 0:
        raise BadInput(f"workload '{name}': 'context_tokens' must be a positive integer", path=path)
    return Workload(name, str(e.get("description", "")), _positive_int(name, e, "concurrency", path),
                    prompt, out, max(ctx, prompt + out), objective, float(floor), bool(e.get("speculative", False)))


@functools.lru_cache(maxsize=8)
def load_workloads(path: str | None = None) -> dict[str, Workload]:
    p = str(path or default_path())
    data = load_yaml_file(p, "workloads file")
    if not isinstance(data, dict) or not isinstance(data.get("workloads"), dict) or not data["workloads"]:
        raise BadInput("expected a top-level 'workloads:' mapping with at least one entry", path=p)
    return {str(k): _parse(str(k), v, p) for k, v in data["workloads"].items()}


def get_workload(name: str, path: str | Path | None = None) -> Workload:
    table = load_workloads(str(path) if path else None)
    if name not in table:
        raise BadInput(f"unknown workload '{name}' (have: {', '.join(table)})", path=str(path or default_path()))
    return table[name]
