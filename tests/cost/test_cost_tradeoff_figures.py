"""The trade-off rows' figures agree with the Predictions."""

from __future__ import annotations

import json

import pytest

from advisor.cli import main

DEMO = "demo:qwen3.6-27b-nvfp4-mixed"          # 20.4 GiB of weights, 262,144-token maximum context


def _plan_json(capsys, *argv):
    assert main(["plan", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def _rows(doc, knob):
    return [o for o in doc["tradeoffs"] if o["knob"] == knob]


def _chosen(doc, knob):
    (row,) = [o for o in _rows(doc, knob) if o["chosen"]]
    return row


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_tradeoff_rows_agree_with_the_predictions(capsys, engine):
    doc = _plan_json(capsys, DEMO, "--gpu", "rtx-3090", "--engine", engine)
    rec, preds = doc["recommendation"], doc["predictions"]
    assert rec["draft_tokens"] > 0 or engine == "sglang"
    kv = _chosen(doc, "kv_cache_dtype")
    assert kv["value"] == rec["kv_cache_dtype"] and kv["metrics"]["fits_workload"] is True
    assert kv["metrics"]["kv_pool_tokens"] == preds["kv_pool_tokens"][rec["kv_cache_dtype"]]
    assert kv["metrics"]["max_context_per_request"] == preds["max_context_per_request"]
    for row in _rows(doc, "kv_cache_dtype"):
        if row["metrics"]:
            assert row["metrics"]["kv_pool_tokens"] == preds["kv_pool_tokens"][row["value"]], row["value"]
            assert f"share {rec['memory_share']:g}" in row["note"]
            assert f"{rec['draft_tokens']} draft tokens" in row["note"]
    pool = preds["kv_pool_tokens"][rec["kv_cache_dtype"]]
    assert _chosen(doc, "chunked_prefill")["metrics"]["kv_pool_tokens"] == pool
    assert _chosen(doc, "memory_share")["metrics"]["max_context_per_request"] == preds["max_context_per_request"]
