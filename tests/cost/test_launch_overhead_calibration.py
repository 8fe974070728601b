"""The per-kernel launch costs plan charges come from the committed measurement, not a hand-kept number:
each engine profile's graph_us_per_kernel (and the PyTorch engines' eager_us_per_kernel) is the median the
measurement file yields by the rule it states, and the profile's source names that file."""

from __future__ import annotations

import json
import statistics

import pytest

from advisor.cost.engine_profile import load_engine_memory
from tests.conftest import ROOT

DATA = ROOT / "profiles/calibration/launch_overhead/h200-2026-12-04.json"


def _medians() -> tuple[float, float]:
    runs = json.loads(DATA.read_text())["runs"]
    graph = [o["graph_us_per_kernel"] for r in runs for o in r["ops"]]
    eager = [d["eager_us_per_kernel"] for r in runs for d in r["decoder"]
             if d["gpu_busy_us"] < 0.5 * d["eager_step_us"]]          # launch-bound runs only
    assert len(graph) >= 4 and len(eager) >= 4
    return statistics.median(graph), statistics.median(eager)


@pytest.mark.parametrize("engine", ["vllm", "sglang", "fastllm"])
def test_graph_gap_is_the_measured_median(engine):
    o = load_engine_memory(engine).overhead
    graph, _ = _medians()
    assert o["graph_us_per_kernel"] == pytest.approx(graph, abs=0.005)
    assert DATA.name in o["graph_source"] and o["graph_source"].startswith("measured")


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_pytorch_engines_eager_cost_is_the_measured_median(engine):
    o = load_engine_memory(engine).overhead
    _, eager = _medians()
    assert o["eager_us_per_kernel"] == pytest.approx(eager, abs=0.05)
    assert DATA.name in o["eager_source"]


def test_the_gpu_bound_run_shows_launches_overlap_the_gpu():
    """The eager step formula is max(GPU, launches): the measured GPU-bound decoder ran eagerly within 15 %
    of its graph replay, far from GPU + launches."""
    _, eager_cost = _medians()
    runs = json.loads(DATA.read_text())["runs"]
    bound = [d for r in runs for d in r["decoder"] if d["gpu_busy_us"] > 0.8 * d["eager_step_us"]]
    assert bound
    for d in bound:
        launches = d["kernels_per_step"] * eager_cost
        assert d["eager_step_us"] < 1.15 * max(d["graph_step_us"], launches)
        assert d["eager_step_us"] < 0.8 * (d["graph_step_us"] + launches)
