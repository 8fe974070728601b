"""What the KV pool holds: the MTP draft layer's KV in the same pool; SGLang's split between full and sliding-
window layers."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from cost_builders import dense_checkpoint

from advisor.cli import main
from advisor.cost.engine_profile import load_engine_memory

VLLM = load_engine_memory("vllm")


def run_json(capsys, *argv):
    code = main(["plan", *argv, "--json"])
    return code, json.loads(capsys.readouterr().out)


# ---------------------------------------------------------------- the MTP draft layer's KV
def test_mtp_draft_layer_keeps_kv_in_the_same_pool(capsys):
    _, mtp = run_json(capsys, "demo:qwen3.6-27b-nvfp4-mixed", "--gpu", "rtx-5090", "--engine", "vllm")
    _, ngram = run_json(capsys, "demo:qwen3.6-27b-nvfp4-mixed", "--gpu", "rtx-5090", "--engine", "vllm",
                        "--spec-method", "ngram")
    assert mtp["recommendation"]["speculative_method"] == "mtp" and mtp["recommendation"]["draft_tokens"] > 0
    a, b = mtp["derivations"]["kv_bytes_per_token"], ngram["derivations"]["kv_bytes_per_token"]
    assert a["inputs"]["kv_layers"] == b["inputs"]["kv_layers"] + 1 and a["inputs"]["mtp_draft_kv_layers"] == 1
    assert a["value"] * b["inputs"]["kv_layers"] == b["value"] * a["inputs"]["kv_layers"]
    assert "gpu_model_runner.py" in a["source"]
    kv = mtp["recommendation"]["kv_cache_dtype"]
    assert mtp["predictions"]["kv_pool_tokens"][kv] < ngram["predictions"]["kv_pool_tokens"][kv]


# ---------------------------------------------------------------- SGLang's split sliding-window pool
def test_sglang_splits_the_pool_between_full_and_window_layers(capsys):
    sgl = load_engine_memory("sglang")
    assert sgl.swa_full_tokens_ratio == 0.8 and "schedule.py" in sgl.swa_source
    assert VLLM.swa_full_tokens_ratio is None
    _, doc = run_json(capsys, "demo:gpt-oss-20b-mxfp4", "--gpu", "rtx-3090", "--engine", "sglang")
    d = doc["derivations"]
    full = d["kv_bytes_per_token"]["inputs"]["kv_layers"]
    win = d["kv_bytes_per_token"]["inputs"]["window_layers"]
    assert full and win and d["kv_bytes_per_token"]["inputs"]["swa_ratio"] == 0.8
    pool = d["kv_pool_bytes"]["value"]
    tokens = doc["predictions"]["kv_pool_tokens"][doc["recommendation"]["kv_cache_dtype"]]
    per_layer = d["kv_bytes_per_token"]["value"] / (full + 0.8 * win)
    assert tokens == pytest.approx(pool / (per_layer * (full + 0.8 * win)), abs=1)
    assert tokens < pool / (per_layer * full) * 0.6          # not pool / full layers alone
    assert any(a["key"] == "swa_full_tokens_ratio" for a in doc["assumptions"])


def test_split_pool_concurrency_is_capped_by_the_window_part():
    from advisor.cost.kv import layout

    arch = replace(dense_checkpoint("BF16", layers=24).arch, kv_layers=12, sliding_window=128,
                   sliding_window_layers=12)
    bf16 = VLLM.kv_dtype("bfloat16")
    vllm_like, sgl_like = layout(arch), layout(arch, swa_ratio=0.8)
    per = vllm_like.bytes_per_token_layer(bf16)
    pool = per * 21.6 * 10_000                                      # 10k full tokens + 8k window tokens
    assert vllm_like.bytes_per_token(bf16) == 12 * per               # vLLM: window layers capped, unchanged
    assert sgl_like.max_context(bf16, pool, 1) == pytest.approx(10_000)
    assert sgl_like.max_concurrency(bf16, pool, 100) == 80           # window part: 8000 // 100
    assert sgl_like.max_concurrency(bf16, pool, 1000) == 10          # full part: 10000 // 1000
    assert sgl_like.max_context(bf16, pool, 100) == pytest.approx(80)   # 100 x 128 > 8000 window tokens
