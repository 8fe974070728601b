"""Invalid head counts in a config make every KV figure N/A, never a pool of millions of tokens."""

from __future__ import annotations

import json

from advisor.cli import main

CFG = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
       "intermediate_size": 11008, "num_hidden_layers": 32, "num_attention_heads": 32,
       "num_key_value_heads": 8, "vocab_size": 32000, "max_position_embeddings": 4096,
       "torch_dtype": "bfloat16"}


def _plan(tmp_path, capsys, **over):
    (tmp_path / "config.json").write_text(json.dumps({**CFG, **over}))
    assert main(["plan", str(tmp_path), "--gpu", "rtx-3090", "--json"]) == 0
    return json.loads(capsys.readouterr().out)["predictions"]


def test_zero_kv_heads_gives_na_kv_figures(tmp_path, capsys):
    p = _plan(tmp_path, capsys, num_attention_heads=0, num_key_value_heads=0)
    assert {"kv_pool_tokens", "max_context_per_request", "max_concurrency_at_context"} <= set(p["na"])


def test_valid_heads_keep_a_kv_pool(tmp_path, capsys):
    p = _plan(tmp_path, capsys)
    assert "kv_pool_tokens" not in p.get("na", {}) and max(p["kv_pool_tokens"].values()) > 10_000
