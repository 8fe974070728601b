"""hf_quant_config.json and config.json `quantization_config` as nvidia-modelopt 0.47.0 writes them
(`get_quant_config`/`process_layer_quant_config`, modelopt/torch/export/quant_utils.py;
`convert_hf_quant_config_format`, modelopt/torch/export/convert_hf_config.py; key order kept)."""

from __future__ import annotations

MODELOPT_VERSION = "0.47.0"   # the version whose layout and arithmetic this converter reproduces
GROUP_SIZE = 16


def hf_quant_config(*, weight_only: bool, exclude_modules: list[str]) -> dict:
    return {
        "producer": {"name": "modelopt", "version": MODELOPT_VERSION},
        "quantization": {
            "quant_algo": "W4A16_NVFP4" if weight_only else "NVFP4",
            "kv_cache_quant_algo": None,
            "group_size": GROUP_SIZE,
            "exclude_modules": list(exclude_modules),
        },
    }


def quantization_config(hf_quant: dict) -> dict:
    """config.json `quantization_config` for a uniform NVFP4 / W4A16_NVFP4 hf_quant_config."""
    q = hf_quant["quantization"]
    fmt = {"dynamic": False, "num_bits": 4, "type": "float", "group_size": q.get("group_size", GROUP_SIZE)}
    group: dict = {}
    if q["quant_algo"] == "NVFP4":
        group["input_activations"] = dict(fmt)
    group["weights"] = dict(fmt)
    group["targets"] = ["Linear"]
    out = {
        "config_groups": {"group_0": group},
        "ignore": list(q.get("exclude_modules") or []),
        "quant_algo": q["quant_algo"],
    }
    if q.get("kv_cache_quant_algo"):
        out["kv_cache_scheme"] = q["kv_cache_quant_algo"]
    out["producer"] = hf_quant["producer"]
    out["quant_method"] = "modelopt"
    return out
