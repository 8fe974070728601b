"""The report's charts agree with the plan they illustrate, and the SVG renderer draws them."""

from __future__ import annotations

import re

import pytest

from advisor.checkpoint.inspect import inspect_checkpoint
from advisor.cost.plan import make_plan
from advisor.cost.workload import get_workload
from advisor.doc import Chart, Heatmap, Series
from advisor.gpu_table import get_gpu
from advisor.kernel_path.explain import explain
from advisor.report.charts import decode_vs_batch, kv_pool_vs_context, roofline
from advisor.report.svg import _log_ticks, chart_svg, heatmap_svg


@pytest.fixture(scope="module", params=["rtx-3090", "h100-sxm"])
def planned(request):
    ck = inspect_checkpoint("demo:qwen3-30b-a3b-nvfp4")
    gpu = get_gpu(request.param)
    exp = explain(ck, gpu)
    return ck, exp, gpu, make_plan(ck, exp, gpu, workload=get_workload("interactive"))


def test_decode_curve_starts_at_the_plans_single_stream_speed(planned):
    ck, exp, gpu, plan = planned
    chart = decode_vs_batch(ck, exp, gpu, plan)
    agg, per = chart.series
    assert agg.x[0] == 1 and agg.y[0] == pytest.approx(plan.predictions.decode_tok_s, rel=1e-3)
    assert list(agg.y) == sorted(agg.y)                       # more streams, more aggregate tokens
    assert all(b >= a for a, b in zip(per.y[1:], per.y))      # and less per stream
    assert max(agg.x) >= max(plan.predictions.decode_aggregate_tok_s)


def test_kv_chart_matches_the_plans_concurrency_at_its_context(planned):
    ck, _, _, plan = planned
    chart = kv_pool_vs_context(ck, plan)
    rec = plan.recommendation.kv_cache_dtype
    series = {s.label: s for s in chart.series}
    assert set(series) == {f"{k} KV" for k in plan.predictions.kv_pool_tokens}
    s = series[f"{rec} KV"]
    ctx = plan.workload.context_tokens
    assert ctx in s.x
    assert s.y[s.x.index(ctx)] == plan.predictions.max_concurrency_at_context
    assert list(s.y) == sorted(s.y, reverse=True)


def test_roofline_points_sit_under_their_roofs(planned):
    ck, _, _, plan = planned
    chart = roofline(ck, plan)
    roofs = [s for s in chart.series if s.label.endswith(" roof")]
    points = {s.label: s for s in chart.series if not s.label.endswith(" roof")}
    dec = points["decode B=1"]
    assert dec.y[0] == pytest.approx(2 * ck.totals.active_params * plan.predictions.decode_tok_s / 1e12)
    bw = next(a.value for a in plan.assumptions if a.key == "dram_bandwidth")
    assert dec.y[0] <= bw * dec.x[0] / 1000 * 1.0001             # decode is under the bandwidth slope
    top = max(max(r.y) for r in roofs)
    assert all(p.y[0] <= top for p in points.values())


def test_svg_chart_and_heatmap_render_every_series_and_cell():
    chart = Chart("t", "x", "y", (Series("a", (1.0, 10.0, 100.0), (1.0, 2.0, 3.0)), Series("b", (5.0,), (2.5,))),
                  log_x=True)
    svg = chart_svg(chart)
    assert svg.count("<polyline") == 1 and svg.count("<circle") == 4
    ticks = re.findall(r'class="tick">([^<]+)<', svg)
    assert {"1", "10", "100"} <= set(ticks)
    heat = heatmap_svg(Heatmap("h", ("g1", "g2"), ("e1", "e2"), ((1.0, None), (10.0, 5.0)), unit="tok/s"))
    assert heat.count('class="cell"') == 4 and "✗" in heat
    assert _log_ticks(0.0, 3.0) == [0.0, 1.0, 2.0, 3.0]
