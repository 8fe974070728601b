"""Fuzz config.json / quantization configs: inspect returns a result or raises BadInput (or Unsupported
when a config-only checkpoint has no usable size numbers), nothing else."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from advisor.checkpoint.inspect import classify
from advisor.checkpoint.sources import CheckpointFiles
from advisor.errors import BadInput, Unsupported

from ckpt_builders import LLAMA_CONFIG

_scalar = st.none() | st.booleans() | st.integers(-3, 300) | st.floats(allow_nan=False, width=32) | st.text(max_size=12)
_json = st.recursive(_scalar, lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=8), c, max_size=3),
                     max_leaves=12)

_KEYS = ["num_hidden_layers", "hidden_size", "num_attention_heads", "num_key_value_heads", "head_dim",
         "intermediate_size", "vocab_size", "layer_types", "num_experts", "num_experts_per_tok", "kv_lora_rank",
         "full_attention_interval", "hybrid_override_pattern", "sliding_window", "tie_word_embeddings",
         "text_config", "vision_config", "moe_intermediate_size", "first_k_dense_replace", "mtp_num_hidden_layers",
         "linear_num_value_heads", "layers_block_type", "linear_attn_config", "decoder_sparse_step", "model_type",
         "architectures", "n_embd", "n_layer", "block_configs", "torch_dtype", "quantization"]

_QC = st.fixed_dictionaries({
    "quant_method": st.sampled_from(["compressed-tensors", "modelopt", "fp8", "gptq", "awq", "bitsandbytes", "mxfp4",
                                     "weird"]) | _json,
}, optional={
    "config_groups": st.dictionaries(st.text(max_size=4), st.fixed_dictionaries({}, optional={
        "targets": st.lists(st.sampled_from(["Linear", "re:.*", "re:[", "lm_head", "model.layers.0.mlp.up_proj"]))
                   | _json,
        "weights": st.fixed_dictionaries({}, optional={"num_bits": st.integers(-1, 9) | _json,
                                                        "type": st.sampled_from(["int", "float"]) | _json,
                                                        "group_size": st.integers(-1, 64) | _json,
                                                        "strategy": _json, "block_structure": _json}) | _json,
        "input_activations": _json}), max_size=2) | _json,
    "ignore": st.lists(st.sampled_from(["lm_head", "re:(", "*", "model.layers.*"])) | _json,
    "bits": _json, "group_size": _json, "weight_block_size": _json, "quant_algo": _json, "quantized_layers": _json,
    "kv_cache_scheme": _json, "modules_to_not_convert": _json, "format": _json,
})


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(st.sampled_from(_KEYS), _json, max_size=6), _QC | _json,
       st.none() | st.fixed_dictionaries({"quantization": _json | st.fixed_dictionaries(
           {"quant_algo": st.sampled_from(["NVFP4", "FP8", "MIXED_PRECISION", "x"]) | _json},
           optional={"quantized_layers": _json, "exclude_modules": _json, "kv_cache_quant_algo": _json})}))
def test_config_fuzz(overrides, qc, hf_quant):
    cfg = {**LLAMA_CONFIG, **overrides, "quantization_config": qc}
    files = CheckpointFiles(source="fuzz", config=json.loads(json.dumps(cfg)), hf_quant_config=hf_quant)
    try:
        info = classify(files)
    except (BadInput, Unsupported) as err:
        assert "\n" not in str(err)
        return
    assert info.totals.params >= 0 and info.label
    # what inspect / report print of it renders too (a non-string model_type once failed only here)
    from advisor.checkpoint.report import to_doc, to_payload
    from advisor.jsonout import document

    to_doc(info)
    json.dumps(document("inspect", to_payload(info)))
