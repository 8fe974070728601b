"""SGLang's own `w8a8_int8` format classifies as W8A8-INT8 (per-token INT8 activations), not W8A16."""

from __future__ import annotations

import json

from advisor.checkpoint.inspect import inspect_checkpoint

CONFIG = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 256,
          "intermediate_size": 512, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
          "vocab_size": 1000, "max_position_embeddings": 4096, "torch_dtype": "bfloat16",
          "quantization_config": {"quant_method": "w8a8_int8", "activation_scheme": "dynamic",
                                  "ignore": ["model.layers.1.mlp.down_proj"]}}


def test_w8a8_int8_quant_method(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(CONFIG))
    info = inspect_checkpoint(str(tmp_path))
    assert info.producer == "w8a8_int8"
    quantized = [m for m in info.modules if m.scheme == "W8A8-INT8"]
    assert quantized and all(m.act.format == "int8" and m.act.dynamic for m in quantized)
    down = [m for m in info.modules if m.name.endswith("down_proj")]
    assert {m.scheme for m in down if 1 in m.layers} == {"BF16"}      # listed in `ignore`
    assert {m.scheme for m in down if 0 in m.layers} == {"W8A8-INT8"}
    assert not any(m.role in ("lm_head", "embed") and m.scheme != "BF16" for m in info.modules)


def test_vllm_refuses_the_sglang_format_and_sglang_runs_it(tmp_path):
    from advisor.gpu_table import get_gpu
    from advisor.kernel_path.explain import explain

    (tmp_path / "config.json").write_text(json.dumps(CONFIG))
    info = inspect_checkpoint(str(tmp_path))
    vllm = explain(info, get_gpu("h100-sxm"), engine="vllm")
    dense = [d for d in vllm.decisions if d.checkpoint_scheme == "W8A8-INT8"]
    assert not vllm.runs and dense and "Unknown quantization method: w8a8_int8" in dense[0].error
    sgl = explain(info, get_gpu("h100-sxm"), engine="sglang")
    assert sgl.runs and any(d.activation_dtype == "int8" for d in sgl.decisions)
