"""Oracle: a tiny random Llama in BF16 and its ModelOpt 0.47 export (runs in the quant venv).

usage: python modelopt_export.py BF16_DIR OUT_DIR CONFIG [MAX_SHARD_SIZE]
CONFIG: W4A16_NVFP4_CFG (weight-only, no calibration) or NVFP4_DEFAULT_CFG (calibrated on
random tokens). No tokenizer and no hub: the model is built from a LlamaConfig
(oracles.md §1 shapes). A few weights are edited before saving so the export meets the edge
cases: k_proj with a larger amax than q/v (the fused group's joint scale matters), an all-zero
block, a block of tiny values (block-scale clamp), tiny negatives that round to FP4 -0.
"""

import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
import torch
import modelopt.torch.quantization as mtq
from modelopt.torch.export import export_hf_checkpoint
from transformers import LlamaConfig, LlamaForCausalLM

bf16_dir, out_dir, cfg_name = sys.argv[1:4]
shard = sys.argv[4] if len(sys.argv) > 4 else "10GB"
torch.manual_seed(0)
cfg = LlamaConfig(vocab_size=1024, hidden_size=256, intermediate_size=512, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, head_dim=64, max_position_embeddings=2048,
                  tie_word_embeddings=False, torch_dtype="bfloat16")
model = LlamaForCausalLM(cfg).to(torch.bfloat16)
with torch.no_grad():
    l0 = model.model.layers[0]
    l0.self_attn.k_proj.weight[5, 7] = 0.75            # k: 3x the amax of q and v
    l0.self_attn.q_proj.weight[1, 0:16] = 0.0           # all-zero block
    l0.self_attn.q_proj.weight[2, 16:32] = 1e-7         # tiny block -> scale clamped to 2^-9
    l0.mlp.up_proj.weight[3, 0:16] = -1e-9              # tiny negatives -> FP4 -0 (0x8)
    l0.mlp.down_proj.weight[0, 0] = -2.5                # outlier
model.save_pretrained(bf16_dir, max_shard_size=shard)
cfg_q = getattr(mtq, cfg_name)
g = torch.Generator().manual_seed(0)
calib = [torch.randint(10, 1024, (1, 32), generator=g) for _ in range(4)]


def forward_loop(m):
    with torch.no_grad():
        for x in calib:
            m(x)


model = mtq.quantize(model, cfg_q, forward_loop)
export_hf_checkpoint(model, dtype=torch.bfloat16, export_dir=out_dir, max_shard_size=shard)
print("exported", out_dir)
