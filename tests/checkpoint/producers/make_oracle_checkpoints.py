"""Build real quantized checkpoints of a tiny random Llama with llm-compressor and ModelOpt.

Runs in the oracle venv (torch 2.13.0, llmcompressor 0.14.0.1 / compressed-tensors 0.19.0,
nvidia-modelopt 0.47.0, transformers 5.17), never in the main one:

    python make_oracle_checkpoints.py OUT_DIR

Writes OUT_DIR/<tool>-<scheme>/ (config.json, hf_quant_config.json for ModelOpt, safetensors)
and OUT_DIR/manifest.json {name: {"tool", "scheme", "versions"}}. No hub access: the model is
built from a config, calibration data are random token ids (shared/research/oracles.md §1-§3).
"""

from __future__ import annotations

import copy
import json
import os
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

import torch  # noqa: E402
from transformers import LlamaConfig, LlamaForCausalLM  # noqa: E402

VOCAB = 1024


def tiny_model(folder: str) -> None:
    """hidden 256, intermediate 512, 2 layers, 4 heads / 2 kv, head_dim 64: every Linear dimension is a
    multiple of 128, so int4 group 128, NVFP4 16-blocks, MXFP4 32-blocks and FP8 128x128 blocks fit."""
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=VOCAB, hidden_size=256, intermediate_size=512, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, head_dim=64, max_position_embeddings=2048,
                      bos_token_id=1, eos_token_id=2, pad_token_id=3, tie_word_embeddings=False,
                      torch_dtype="bfloat16")
    LlamaForCausalLM(cfg).to(torch.bfloat16).save_pretrained(folder, safe_serialization=True)
    # llm-compressor needs a processor when calibration data are given: a word-level tokenizer, no training
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {t: i for i, t in enumerate(["<unk>", "<s>", "</s>", "<pad>"] + [f"w{i}" for i in range(VOCAB - 4)])}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", unk_token="<unk>",
                            pad_token="<pad>").save_pretrained(folder)


def load(folder: str):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(folder, dtype=torch.bfloat16)


def calib_ids(n=2, seqlen=32):
    g = torch.Generator().manual_seed(0)
    return torch.randint(10, VOCAB, (n, seqlen), generator=g)


def llmc(base: str, out: str, manifest: dict) -> None:
    from datasets import Dataset
    from compressed_tensors.quantization import preset_name_to_scheme
    from llmcompressor import oneshot
    from llmcompressor.modifiers.quantization import QuantizationModifier

    ids = calib_ids().tolist()
    ds = Dataset.from_dict({"input_ids": ids, "attention_mask": [[1] * len(i) for i in ids]})

    def qm(scheme, **kw):
        return QuantizationModifier(targets="Linear", scheme=scheme, ignore=["lm_head"], **kw)

    attn, mlp = [r"re:.*self_attn\.(q|k|v|o)_proj$"], [r"re:.*mlp\.(gate|up|down)_proj$"]
    recipes = {
        "W4A16": (qm("W4A16"), False),
        "W8A16": (qm("W8A16"), False),
        "FP8_DYNAMIC": (qm("FP8_DYNAMIC"), False),
        "FP8": (qm("FP8"), True),
        "W8A8": (qm("W8A8"), False),
        "NVFP4A16": (qm("NVFP4A16"), False),
        "NVFP4": (qm("NVFP4"), True),
        "MXFP4": (qm("MXFP4"), False),
        "MIXED_FP": (QuantizationModifier(ignore=["lm_head"], config_groups={
            "group_0": preset_name_to_scheme("FP8_DYNAMIC", attn).model_dump(),
            "group_1": preset_name_to_scheme("NVFP4A16", mlp).model_dump()}), False),
        "FP8_DYNAMIC_KV": (qm("FP8_DYNAMIC", kv_cache_scheme={"num_bits": 8, "type": "float", "strategy": "tensor",
                                                               "dynamic": False, "symmetric": True}), True),
    }
    for name, (recipe, needs_data) in recipes.items():
        t0 = time.time()
        model = load(base)
        kw = dict(dataset=ds, num_calibration_samples=len(ids), max_seq_length=32,
                  shuffle_calibration_samples=False) if needs_data else {}
        oneshot(model=model, recipe=recipe, **kw)
        folder = os.path.join(out, f"llmc-{name}")
        model.save_pretrained(folder, save_compressed=True)
        manifest[f"llmc-{name}"] = {"tool": "llm-compressor", "scheme": name, "seconds": round(time.time() - t0, 2)}


def modelopt(base: str, out: str, manifest: dict) -> None:
    import modelopt.torch.quantization as mtq
    from modelopt.torch.export import export_hf_checkpoint

    calib = [calib_ids(1, 32) for _ in range(2)]

    def forward_loop(m):
        with torch.no_grad():
            for x in calib:
                m(x)

    fp8 = {"num_bits": (4, 3), "axis": None}
    mixed = copy.deepcopy(mtq.NVFP4_DEFAULT_CFG)
    mixed["quant_cfg"] += [{"quantizer_name": "*self_attn*weight_quantizer", "cfg": fp8},
                           {"quantizer_name": "*self_attn*input_quantizer", "cfg": fp8}]
    kv = copy.deepcopy(mtq.NVFP4_DEFAULT_CFG)
    kv["quant_cfg"] += mtq.FP8_KV_CFG["quant_cfg"]
    awq = copy.deepcopy(mtq.INT4_AWQ_CFG)
    awq["algorithm"] = {"method": "awq_lite", "alpha_step": 0.5}   # 3 smoothing candidates, not 11: same export format
    configs = {"NVFP4": mtq.NVFP4_DEFAULT_CFG, "FP8": mtq.FP8_DEFAULT_CFG, "W4A16_NVFP4": mtq.W4A16_NVFP4_CFG,
               "INT4_AWQ": awq, "MIXED_NVFP4_FP8": mixed, "NVFP4_FP8KV": kv}
    for name, cfg in configs.items():
        t0 = time.time()
        model = mtq.quantize(load(base), cfg, forward_loop)
        folder = os.path.join(out, f"mo-{name}")
        export_hf_checkpoint(model, export_dir=folder)
        manifest[f"mo-{name}"] = {"tool": "modelopt", "scheme": name, "seconds": round(time.time() - t0, 2)}


def main(out: str) -> int:
    os.makedirs(out, exist_ok=True)
    base = os.path.join(out, "tiny-llama-bf16")
    tiny_model(base)
    manifest: dict = {"tiny-llama-bf16": {"tool": "transformers", "scheme": "BF16"}}
    llmc(base, out, manifest)
    modelopt(base, out, manifest)
    import compressed_tensors
    import llmcompressor
    import modelopt as mo
    import transformers

    versions = {"llmcompressor": llmcompressor.__version__, "compressed_tensors": compressed_tensors.__version__,
                "modelopt": mo.__version__, "transformers": transformers.__version__, "torch": torch.__version__}
    for v in manifest.values():
        v["versions"] = versions
    with open(os.path.join(out, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
