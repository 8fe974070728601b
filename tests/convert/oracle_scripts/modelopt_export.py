"""Oracle: a tiny random model in BF16 and its ModelOpt 0.47 export (runs in the quant venv).

usage: python modelopt_export.py ARCH BF16_DIR OUT_DIR CONFIG [MAX_SHARD_SIZE]
ARCH: llama (oracles.md §1 shapes) or qwen3_5_moe (hybrid gated-delta-net + full attention,
routed experts + shared expert). CONFIG: W4A16_NVFP4_CFG (weight-only, no calibration) or
NVFP4_DEFAULT_CFG (calibrated on random tokens). No tokenizer and no hub.
A few weights are edited before saving so the export meets the edge cases: one member of each
fused group with a larger amax than the others (the joint scale matters), an all-zero block, a
block of tiny values (block-scale clamp), tiny negatives that round to FP4 -0.
For qwen3_5_moe the BF16 copy is written with the tensor names the export uses
(model.language_model.*), as published Qwen3.5 checkpoints name them.
"""

import json
import os
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
import torch
import modelopt.torch.quantization as mtq
from modelopt.torch.export import export_hf_checkpoint

arch, bf16_dir, out_dir, cfg_name = sys.argv[1:5]
shard = sys.argv[5] if len(sys.argv) > 5 else "10GB"
torch.manual_seed(0)

if arch == "llama":
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(vocab_size=1024, hidden_size=256, intermediate_size=512, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, head_dim=64, max_position_embeddings=2048,
                      tie_word_embeddings=False)
    model = LlamaForCausalLM(cfg).to(torch.bfloat16)
    with torch.no_grad():
        l0 = model.model.layers[0]
        l0.self_attn.k_proj.weight[5, 7] = 0.75            # k: 3x the amax of q and v
        l0.self_attn.q_proj.weight[1, 0:16] = 0.0           # all-zero block
        l0.self_attn.q_proj.weight[2, 16:32] = 1e-7         # tiny block -> scale clamped to 2^-9
        l0.mlp.up_proj.weight[3, 0:16] = -1e-9              # tiny negatives -> FP4 -0 (0x8)
        l0.mlp.down_proj.weight[0, 0] = -2.5                # outlier
    model.save_pretrained(bf16_dir, max_shard_size=shard)
elif arch == "qwen3_5_moe":
    from safetensors.torch import load_file, save_file
    from transformers import Qwen3_5MoeForCausalLM, Qwen3_5MoeTextConfig

    cfg = Qwen3_5MoeTextConfig(vocab_size=512, hidden_size=128, num_hidden_layers=2, num_attention_heads=2,
                               num_key_value_heads=1, head_dim=64, linear_num_value_heads=2, linear_num_key_heads=2,
                               linear_key_head_dim=32, linear_value_head_dim=32, linear_conv_kernel_dim=4,
                               num_experts=4, num_experts_per_tok=2, moe_intermediate_size=64,
                               shared_expert_intermediate_size=64, layer_types=["linear_attention", "full_attention"],
                               tie_word_embeddings=False)
    model = Qwen3_5MoeForCausalLM(cfg).to(torch.bfloat16)
    with torch.no_grad():
        la = model.model.layers[0].linear_attn
        la.in_proj_z.weight[3, 3] = 0.9                     # z above qkv: joint GDN scale
        la.in_proj_a.weight.mul_(20)                        # kept in BF16 by ModelOpt 0.47's defaults
        mlp = model.model.layers[0].mlp
        mlp.shared_expert.up_proj.weight[0, 0] = 0.8        # shared expert gate/up share
        model.model.layers[1].self_attn.v_proj.weight[2, 2] = 1.5
    model.save_pretrained(bf16_dir)
    # rename to the export's (and the published checkpoints') names: model.language_model.*
    src = Path(bf16_dir) / "model.safetensors"
    tensors = load_file(str(src))
    tensors = {("model.language_model." + n[len("model."):] if n.startswith("model.") else n): t
               for n, t in tensors.items()}
    save_file(tensors, str(src), metadata={"format": "pt"})
else:
    raise SystemExit(f"unknown arch {arch}")

g = torch.Generator().manual_seed(0)
calib = [torch.randint(10, cfg.vocab_size, (1, 32), generator=g) for _ in range(4)]


def forward_loop(m):
    with torch.no_grad():
        for x in calib:
            m(x)


model = mtq.quantize(model, getattr(mtq, cfg_name), forward_loop)
export_hf_checkpoint(model, dtype=torch.bfloat16, export_dir=out_dir, max_shard_size=shard)
print("exported", out_dir, json.dumps(sorted(os.listdir(out_dir))))
