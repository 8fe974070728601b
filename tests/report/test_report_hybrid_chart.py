"""The KV-pool chart counts a hybrid model's per-request recurrent state, as the plan does."""

from __future__ import annotations

import pytest

from advisor.services.analysis import Selection, analyze
from advisor.cost.kv import layout
from advisor.report.charts import kv_pool_vs_context


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_hybrid_chart_holds_fewer_requests_than_kv_alone(engine):
    a = analyze(Selection("demo:qwen3.6-27b-nvfp4-mixed", "h100-sxm", engine=engine))
    st = a.plan.predictions.recurrent_state
    assert st is not None and st.bytes_per_request > 0
    chart = kv_pool_vs_context(a.checkpoint, a.plan)
    pool = a.plan.derivations["kv_pool_bytes"].value
    lay = layout(a.checkpoint.arch, a.plan.recommendation.tp)
    from advisor.cost.engine_profile import load_engine_memory

    eng = load_engine_memory(engine)
    assert any(y < lay.max_concurrency(eng.kv_dtype(s.label.removesuffix(" KV")), pool, x)
               for s in chart.series for x, y in zip(s.x, s.y))
    for s in chart.series:
        dt = eng.kv_dtype(s.label.removesuffix(" KV"))
        for x, y in zip(s.x, s.y):
            kv_only = lay.max_concurrency(dt, pool, x)
            assert y <= kv_only, (s.label, x, y, kv_only)
            if st.pool == "shared":
                assert y == int(pool // (lay.request_bytes(dt, x) + st.bytes_per_request))
            else:
                assert y <= st.max_requests
