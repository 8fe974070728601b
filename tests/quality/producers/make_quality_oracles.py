"""Real quantized checkpoints of one tiny random Llama, for `quality` (runs in the oracle venv).

    python make_quality_oracles.py OUT_DIR

Writes OUT_DIR/bf16 (the reference) and one folder per producer x scheme, plus manifest.json.
llm-compressor 0.14 (compressed-tensors 0.19): RTN presets and one GPTQ run; nvidia-modelopt 0.47:
NVFP4, FP8 and INT4 AWQ. Calibration data are random token ids; no hub access.
Shapes: hidden 256, intermediate 512, 2 layers, 4 heads / 2 KV heads, head_dim 64, so every
linear dimension is a multiple of 128 (int4 group 128, NVFP4 16, MXFP4 32, FP8 128x128 blocks).
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
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=VOCAB, hidden_size=256, intermediate_size=512, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, head_dim=64, max_position_embeddings=2048,
                      bos_token_id=1, eos_token_id=2, pad_token_id=3, tie_word_embeddings=False)
    model = LlamaForCausalLM(cfg).to(torch.bfloat16)
    with torch.no_grad():   # real weights are not Gaussian: a few outliers and a heavier tail
        for layer in model.model.layers:
            for lin in (layer.self_attn.q_proj, layer.mlp.down_proj):
                lin.weight[3, 5] = 12 * lin.weight.abs().max()
                lin.weight.mul_(1 + 0.5 * torch.randn_like(lin.weight).abs())
    model.save_pretrained(folder, safe_serialization=True)
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


def calib_ids(n=4, seqlen=64):
    g = torch.Generator().manual_seed(0)
    return torch.randint(10, VOCAB, (n, seqlen), generator=g)


def llmc(base: str, out: str, manifest: dict) -> None:
    from datasets import Dataset
    from llmcompressor import oneshot
    from llmcompressor.modifiers.quantization import GPTQModifier, QuantizationModifier

    ids = calib_ids().tolist()
    ds = Dataset.from_dict({"input_ids": ids, "attention_mask": [[1] * len(i) for i in ids]})

    def qm(scheme):
        return QuantizationModifier(targets="Linear", scheme=scheme, ignore=["lm_head"])

    recipes = {
        "NVFP4A16": (qm("NVFP4A16"), False), "NVFP4": (qm("NVFP4"), True),
        "FP8": (qm("FP8"), True), "FP8_DYNAMIC": (qm("FP8_DYNAMIC"), False), "FP8_BLOCK": (qm("FP8_BLOCK"), False),
        "MXFP4A16": (qm("MXFP4A16"), False), "W4A16": (qm("W4A16"), False), "W4A16_ASYM": (qm("W4A16_ASYM"), False),
        "W8A8": (qm("W8A8"), False),
        "GPTQ_W4A16": (GPTQModifier(targets="Linear", scheme="W4A16", ignore=["lm_head"]), True),
    }
    for name, (recipe, needs_data) in recipes.items():
        t0 = time.time()
        model = load(base)
        kw = dict(dataset=ds, num_calibration_samples=len(ids), max_seq_length=64,
                  shuffle_calibration_samples=False) if needs_data else {}
        oneshot(model=model, recipe=recipe, **kw)
        folder = os.path.join(out, f"llmc-{name}")
        model.save_pretrained(folder, save_compressed=True)
        manifest[f"llmc-{name}"] = {"tool": "llm-compressor", "scheme": name, "seconds": round(time.time() - t0, 2)}


def modelopt(base: str, out: str, manifest: dict) -> None:
    import modelopt.torch.quantization as mtq
    from modelopt.torch.export import export_hf_checkpoint

    calib = [calib_ids(1, 64) for _ in range(2)]

    def forward_loop(m):
        with torch.no_grad():
            for x in calib:
                m(x)

    awq = copy.deepcopy(mtq.INT4_AWQ_CFG)
    awq["algorithm"] = {"method": "awq_lite", "alpha_step": 0.5}
    configs = {"NVFP4": mtq.NVFP4_DEFAULT_CFG, "FP8": mtq.FP8_DEFAULT_CFG, "INT4_AWQ": awq}
    for name, cfg in configs.items():
        t0 = time.time()
        model = mtq.quantize(load(base), cfg, forward_loop)
        folder = os.path.join(out, f"mo-{name}")
        export_hf_checkpoint(model, export_dir=folder)
        manifest[f"mo-{name}"] = {"tool": "modelopt", "scheme": name, "seconds": round(time.time() - t0, 2)}


def main(out: str) -> int:
    os.makedirs(out, exist_ok=True)
    base = os.path.join(out, "bf16")
    tiny_model(base)
    manifest: dict = {}
    llmc(base, out, manifest)
    modelopt(base, out, manifest)
    with open(os.path.join(out, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
