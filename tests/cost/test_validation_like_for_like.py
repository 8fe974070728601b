"""benchmarks/validate_cost.py compares like with like: a point whose engine ran another kernel path than
the one plan costs (older version's log, patched build, other checkpoint) is shown but set apart from
the headline medians, with its reason."""

from __future__ import annotations

import sys

import pytest
import yaml

from advisor.errors import BadInput
from tests.conftest import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))
import validate_cost as vc  # noqa: E402


def _point(pid: str, measured: float, **extra) -> dict:
    return {"id": pid, "gpu": "h100-sxm", "tp": 1, "engine": "vllm", "metric": "decode_tok_s",
            "measured": measured, **extra}


def test_set_apart_points_stay_out_of_the_like_with_like_medians():
    results = [vc.Result(_point("a", 100.0), 110.0),                                   # +10 %
               vc.Result(_point("b", 100.0, ratio_to="a"), 120.0),                     # +20 %
               vc.Result(_point("c", 100.0, set_apart="patched build"), 300.0),        # +200 %
               vc.Result(_point("d", 50.0, ratio_to="c"), 60.0)]                       # +20 %
    text = vc.report(results, markdown=False)
    assert "absolute figures, like with like: 20 % over 3 points" in text
    assert "absolute figures, every point: 20 % over 4 points" in text
    # d / c involves a set-apart point: only b / a is like with like
    assert "ratios, like with like: 9 % over 1 pairs" in text
    assert "ratios, every pair: 35 % over 2 pairs" in text     # median of 9 % and 60 %
    assert "c (set apart)" in text and "- c: patched build" in text


@pytest.mark.parametrize("why", ["", "  ", 3, None])
def test_set_apart_must_say_why(tmp_path, why):
    p = {**{k: 1 for k in vc.REQUIRED}, "id": "x", "metric": "decode_tok_s", "set_apart": why}
    f = tmp_path / "points.yaml"
    f.write_text(yaml.safe_dump({"points": [p]}))
    with pytest.raises(BadInput, match="set_apart must say why"):
        vc.load_points(f)


def test_shipped_points_from_patched_builds_are_set_apart():
    """A build the source calls patched did not run the rules plan predicts with."""
    points = vc.load_points(vc.POINTS)
    patched = [p for p in points if "patched" in str(p.get("engine_version", "")).lower()]
    assert patched and all(p.get("set_apart") for p in patched)
    # a set-apart point still needs its measurement sourced like every other
    for p in points:
        if p.get("set_apart"):
            assert p["url"].startswith("https://") and len(p["set_apart"]) > 30
