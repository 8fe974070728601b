"""Benchmark: inspect a local 64-layer, 3-shard, ~2,700-tensor NVFP4 checkpoint (headers only).

    python benchmarks/inspect_speed.py [--runs 15] [--keep DIR]

Builds two checkpoints with identical tensor names: one with real Qwen3-8B-class shapes written
as *sparse* files (about 6 GB apparent size, almost no disk used) and one with tiny shapes. The
time target is a median <= 0.2 s per inspect; peak RSS, measured in fresh subprocesses, must not
depend on the weight size (ratio ~1.0), since only headers (and a few 4-byte global scales) are read.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import struct
import subprocess
import sys
import tempfile
import time

TARGET_S = 0.2
BITS = {"U8": 8, "F8_E4M3": 8, "F32": 32, "BF16": 16}


def _tensors(layers: int, h: int, inter: int, heads: int, kvh: int, hd: int, vocab: int) -> list[tuple[str, str, list]]:
    """ModelOpt NVFP4 layout: weight U8 [N, K/2], weight_scale F8_E4M3 [N, K/16], F32 scalars."""
    out = [("model.embed_tokens.weight", "BF16", [vocab, h]), ("model.norm.weight", "BF16", [h]),
           ("lm_head.weight", "BF16", [vocab, h])]

    def lin(p, n, k):
        out.extend([(f"{p}.weight", "U8", [n, k // 2]), (f"{p}.weight_scale", "F8_E4M3", [n, k // 16]),
                    (f"{p}.weight_scale_2", "F32", []), (f"{p}.input_scale", "F32", [])])

    for i in range(layers):
        p = f"model.layers.{i}"
        out += [(f"{p}.input_layernorm.weight", "BF16", [h]), (f"{p}.post_attention_layernorm.weight", "BF16", [h])]
        for name, n, k in (("q_proj", heads * hd, h), ("k_proj", kvh * hd, h), ("v_proj", kvh * hd, h),
                           ("o_proj", h, heads * hd)):
            lin(f"{p}.self_attn.{name}", n, k)
        for mlp in ("mlp", "mlp.shared_expert"):
            for name, n, k in (("gate_proj", inter, h), ("up_proj", inter, h), ("down_proj", h, inter)):
                lin(f"{p}.{mlp}.{name}", n, k)
    return out


def _nbytes(dtype, shape):
    n = 1
    for d in shape:
        n *= d
    return n * BITS[dtype] // 8


def build(folder: str, *, tiny: bool) -> int:
    os.makedirs(folder, exist_ok=True)
    dims = dict(layers=64, h=64, inter=128, heads=4, kvh=2, hd=16, vocab=256) if tiny else \
        dict(layers=64, h=4096, inter=6144, heads=32, kvh=8, hd=128, vocab=151936)
    tensors = _tensors(**dims)
    shards = 3
    weight_map, total = {}, 0
    for s in range(shards):
        part = tensors[s::shards]
        fname = f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
        hdr, pos = {"__metadata__": {"format": "pt"}}, 0
        for name, dt, shape in part:
            nb = _nbytes(dt, shape)
            hdr[name] = {"dtype": dt, "shape": shape, "data_offsets": [pos, pos + nb]}
            pos += nb
            weight_map[name] = fname
        body = json.dumps(hdr).encode()
        body += b" " * (-len(body) % 8)
        path = os.path.join(folder, fname)
        with open(path, "wb") as f:
            f.write(struct.pack("<Q", len(body)) + body)
        os.truncate(path, 8 + len(body) + pos)           # sparse: the data region is a hole
        total += pos
    with open(os.path.join(folder, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f)
    cfg = {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": dims["h"],
           "intermediate_size": dims["inter"], "num_hidden_layers": dims["layers"], "num_attention_heads": dims["heads"],
           "num_key_value_heads": dims["kvh"], "head_dim": dims["hd"], "vocab_size": dims["vocab"],
           "tie_word_embeddings": False, "torch_dtype": "bfloat16"}
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(cfg, f)
    with open(os.path.join(folder, "hf_quant_config.json"), "w") as f:
        json.dump({"producer": {"name": "modelopt", "version": "0.47.0"},
                   "quantization": {"quant_algo": "NVFP4", "kv_cache_quant_algo": "FP8", "group_size": 16,
                                    "exclude_modules": ["lm_head"]}}, f)
    return len(tensors)


_RSS = ("import resource, sys, time; from advisor.checkpoint.inspect import inspect_checkpoint; "
        "base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss; t = time.perf_counter(); "
        "info = inspect_checkpoint(sys.argv[1]); dt = time.perf_counter() - t; "
        "print(base, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, dt, info.totals.stored_bytes, info.label)")


def peak_rss(folder: str) -> tuple[int, int, float, int, str]:
    r = subprocess.run([sys.executable, "-c", _RSS, folder], capture_output=True, text=True, check=True)
    base, peak, dt, stored, label = r.stdout.split()
    return int(base), int(peak), float(dt), int(stored), label


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--keep", help="build the checkpoints here and keep them")
    args = ap.parse_args()
    root = args.keep or tempfile.mkdtemp(prefix="inspect-bench-")
    big, tiny = os.path.join(root, "big"), os.path.join(root, "tiny")
    n = build(big, tiny=False)
    build(tiny, tiny=True)
    from advisor.checkpoint.inspect import inspect_checkpoint

    info = inspect_checkpoint(big)                     # warm the page cache and imports
    times = []
    for _ in range(args.runs):
        t = time.perf_counter()
        inspect_checkpoint(big)
        times.append(time.perf_counter() - t)
    med = statistics.median(times)
    b_base, b_peak, b_cold, b_stored, _ = peak_rss(big)
    t_base, t_peak, _, t_stored, _ = peak_rss(tiny)
    result = {
        "tensors": n, "shards": 3, "layers": info.arch.num_layers, "label": info.label,
        "module_groups": len(info.modules),
        "weights_bytes_big": b_stored, "weights_bytes_tiny": t_stored,
        "inspect_median_s": round(med, 4), "inspect_min_s": round(min(times), 4), "inspect_max_s": round(max(times), 4),
        "first_call_in_fresh_process_s": round(b_cold, 4),
        "target_s": TARGET_S, "median_over_target": round(med / TARGET_S, 3), "meets_target": med <= TARGET_S,
        "peak_rss_kib_big": b_peak, "peak_rss_kib_tiny": t_peak,
        "rss_growth_kib_big": b_peak - b_base, "rss_growth_kib_tiny": t_peak - t_base,
        "peak_rss_ratio_big_over_tiny": round(b_peak / t_peak, 3),
        "weight_size_ratio_big_over_tiny": round(b_stored / max(t_stored, 1), 1),
    }
    print(json.dumps(result, indent=2))
    return 0 if result["meets_target"] else 1


if __name__ == "__main__":
    sys.exit(main())
