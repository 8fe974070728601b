"""Small-M padding on tcgen05 / wgmma: swap-AB pads the N side only; batch-one decode stays bandwidth bound,
large prefill compute bound."""

from __future__ import annotations

import json

from cost_builders import dense_checkpoint, explanation

from advisor.cli import main
from advisor.cost import context
from advisor.cost.engine_profile import load_engine_memory
from advisor.cost.overrides import Overrides
from advisor.gpu_table import get_gpu

VLLM = load_engine_memory("vllm")


def run_json(capsys, *argv):
    code = main(["plan", *argv, "--json"])
    return code, json.loads(capsys.readouterr().out)


def test_swap_ab_pads_small_batches_on_the_n_side_only():
    from advisor.cost.efficiency import padded_rows

    assert padded_rows("tcgen05_fp4_block_scaled", 1) == 16          # not 128
    assert padded_rows("wgmma_e4m3", 1) == 8                         # not 64
    assert padded_rows("tcgen05_bf16", 200) == 256 and padded_rows("wgmma_bf16", 100) == 128
    assert padded_rows("hmma_bf16", 1) == 16                          # mma.sync unchanged


def test_b200_batch_one_decode_is_bandwidth_bound(capsys):
    _, doc = run_json(capsys, "demo:qwen3.6-27b-nvfp4-mixed", "--gpu", "b200", "--engine", "vllm")
    p, i = doc["predictions"], doc["derivations"]["decode_tok_s"]["inputs"]
    assert p["bound"] == "bandwidth" and p["crossover_batch"] != 1
    assert i["t_mma"] < i["t_bytes"]
    assert any(a["key"] == "swap_ab_max_m" and "cutlass_moe.py" in a["source"] for a in doc["assumptions"])


def test_large_batch_prefill_on_b200_stays_compute_bound():
    gpu = get_gpu("b200")
    ck = dense_checkpoint("W4A4-NVFP4")
    ctx = context.build(ck, explanation("W4A4-NVFP4", gpu=gpu.id, mma="tcgen05_fp4_block_scaled",
                                        kv_mma="tcgen05_bf16"), gpu, gpus=1, engine=VLLM, overrides=Overrides())
    kv = VLLM.kv_dtype("bfloat16")
    pf = ctx.model.prefill(8192, 8192, kv)
    assert pf.t_compute > pf.t_bytes
    big = ctx.model.decode_step(512, 1024, kv)
    rate = ctx.model.eff.mma_tflops["tcgen05_fp4_block_scaled"] * 1e12
    linear = sum(ctx.model.weights.flops_per_token(1)[part] for part in ctx.model.weights.parts
                 if part.mma == "tcgen05_fp4_block_scaled")
    assert big.derived.inputs["t_mma"] >= 512 * linear / rate      # 512 rows: four full M=128 tiles
