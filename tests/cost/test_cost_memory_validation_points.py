"""benchmarks/validate_memory.py's published points are complete and the script runs on them (the error
figures themselves are reported by the script, benchmarks/README.md; nothing is fitted to them)."""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _script():
    spec = importlib.util.spec_from_file_location("validate_memory", ROOT / "benchmarks" / "validate_memory.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["validate_memory"] = mod        # dataclasses look their module up there
    spec.loader.exec_module(mod)
    return mod


def test_every_point_cites_its_log_and_conditions():
    vm = _script()
    points = vm.load_points(ROOT / "benchmarks" / "memory_logs" / "points.yaml")
    assert len({p["id"] for p in points}) == len(points) >= 5
    for p in points:
        assert p["link"].startswith("https://") and p["quote"] and p["conditions"], p["id"]
        assert set(p["reported"]) & {"kv_gib", "kv_tokens"}, p["id"]
        if not p["config"].startswith("demo:"):
            assert (ROOT / "benchmarks" / "memory_logs" / "configs" / p["config"] / "config.json").is_file()
        # every number the log's reading depends on is written out
        knobs = {"memory_share", "max_batch", "chunked_prefill", "tp", "kv_cache_dtype", "cuda_graphs"}
        assert knobs <= set(p["flags"])


def test_the_script_compares_each_point_with_a_plan():
    vm = _script()
    points = vm.load_points(ROOT / "benchmarks" / "memory_logs" / "points.yaml")
    rows = [vm.predict(p) for p in points]
    for r in rows:
        assert r.predicted > 0 and math.isfinite(r.error), r.id
        assert "weights" in r.terms and "budget" in r.terms
    table = vm.markdown(rows)
    assert table.count("\n| [") == len(rows) and "median |error|" in table
