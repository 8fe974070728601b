"""The hybrid 27B of issue 16 (64 layers: 48 Gated-DeltaNet + 16 full attention, hidden 5120) written as a
config-only checkpoint folder: the demo's config.json without its quantization block, plus a ModelOpt
hf_quant_config.json that quantizes every linear layer (NVFP4, or per-tensor FP8 as ModelOpt writes it),
keeping lm_head, the vision tower and the MTP head in BF16 as a self-converted checkpoint does."""

from __future__ import annotations

import json
from pathlib import Path

DEMO = Path(__file__).resolve().parents[2] / "profiles" / "demo" / "qwen3.6-27b-nvfp4-mixed"
KEEP = ["lm_head", "model.visual*", "mtp*"]


def write_hybrid27b(folder: Path, algo: str) -> Path:
    """``algo``: 'NVFP4' (W4A4, group 16) or 'FP8' (W8A8, per-tensor weight and input scales)."""
    config = json.loads((DEMO / "config.json").read_text())
    config.pop("quantization_config", None)
    quant = {"quant_algo": algo, "kv_cache_quant_algo": None, "exclude_modules": KEEP}
    if algo == "NVFP4":
        quant["group_size"] = 16
    config["quantization_config"] = {"quant_method": "modelopt", **quant}
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config, indent=1))
    (folder / "hf_quant_config.json").write_text(json.dumps(
        {"producer": {"name": "modelopt", "version": "0.47.0"}, "quantization": quant}, indent=1))
    return folder
