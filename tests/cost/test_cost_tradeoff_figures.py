"""The trade-off rows' figures agree with the Predictions."""

from __future__ import annotations


import pytest

from cost_plan_tradeoffs import chosen_tradeoff, plan_json, tradeoff_rows

DEMO = "demo:qwen3.6-27b-nvfp4-mixed"          # 20.4 GiB of weights, 262,144-token maximum context


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_tradeoff_rows_agree_with_the_predictions(capsys, engine):
    doc = plan_json(capsys, DEMO, "--gpu", "rtx-3090", "--engine", engine)
    rec, preds = doc["recommendation"], doc["predictions"]
    assert rec["draft_tokens"] > 0 or engine == "sglang"
    kv = chosen_tradeoff(doc, "kv_cache_dtype")
    assert kv["value"] == rec["kv_cache_dtype"] and kv["metrics"]["fits_workload"] is True
    assert kv["metrics"]["kv_pool_tokens"] == preds["kv_pool_tokens"][rec["kv_cache_dtype"]]
    assert kv["metrics"]["max_context_per_request"] == preds["max_context_per_request"]
    for row in tradeoff_rows(doc, "kv_cache_dtype"):
        if row["metrics"]:
            assert row["metrics"]["kv_pool_tokens"] == preds["kv_pool_tokens"][row["value"]], row["value"]
            assert f"share {rec['memory_share']:g}" in row["note"]
            assert f"{rec['draft_tokens']} draft tokens" in row["note"]
    pool = preds["kv_pool_tokens"][rec["kv_cache_dtype"]]
    assert chosen_tradeoff(doc, "chunked_prefill")["metrics"]["kv_pool_tokens"] == pool
    share = chosen_tradeoff(doc, "memory_share")
    assert share["metrics"]["max_context_per_request"] == preds["max_context_per_request"]
