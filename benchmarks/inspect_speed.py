"""Benchmark: `inspect --json` against the header-read floor, on header-only NVFP4 MoE checkpoints.

    python benchmarks/inspect_speed.py [--runs 5] [--sizes 3000,19000,100000] [--keep DIR] [--smoke]

Builds ModelOpt NVFP4 Qwen3-MoE-layout checkpoints of about 3 k / 19 k / 100 k tensors (tiny shapes,
data regions left as sparse holes, ~4 k tensors per shard) and measures, as medians of --runs:
- fresh process: `python -m advisor inspect DIR --json` vs a floor script that only opens each shard
  and json-parses its header (both pay interpreter start; inspect also pays its imports), taking turns run
  by run, wall time and, less distorted on a busy machine, CPU time (user + system of the child);
- in process (imports done): inspect_checkpoint() vs the same floor loop, and their time per tensor;
- peak RSS growth of inspect_checkpoint() in a fresh process (after imports) vs the header bytes: VmHWM
  after minus VmRSS before, from /proc/self/status (ru_maxrss would start at the parent's peak).

Targets (issue 23 point 1): fresh-process inspect <= 3x the floor at the largest size; time per tensor
in process, largest size over smallest, <= 1.3 (linear); RSS growth <= 3x the header bytes.
--smoke: tiny sizes, one run, no targets (tests/benchmarks runs it so the script cannot rot).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FLOOR_RATIO, LINEAR_RATIO, MEMORY_RATIO = 3.0, 1.3, 3.0
PER_SHARD = 4000
H, INTER, HEADS, KVH, HD, VOCAB = 64, 32, 4, 2, 16, 256
BITS = {"U8": 8, "F8_E4M3": 8, "F32": 32, "BF16": 16}

FLOOR = ("import json, struct, sys\n"
         "for p in sys.argv[1:]:\n"
         "    with open(p, 'rb') as f:\n"
         "        json.loads(f.read(struct.unpack('<Q', f.read(8))[0]))\n")

_IN_PROCESS = """
import gc, json, resource, struct, sys, time
sys.path.insert(0, {root!r})
from advisor.checkpoint.inspect import inspect_checkpoint
folder, shards, runs, mode = sys.argv[1], sys.argv[2].split(","), int(sys.argv[3]), sys.argv[4]
def vm(key):
    # this process's own resident set (VmRSS) and its peak (VmHWM), in KiB. Not ru_maxrss: Linux carries
    # the parent's peak over fork and exec into it, so a child of a large parent starts at that peak.
    try:
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith(key))
    except (OSError, StopIteration):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
if mode == "rss":
    base = vm("VmRSS:")
    inspect_checkpoint(folder)
    print(json.dumps([base, vm("VmHWM:")]))
    sys.exit()
def floor():
    for p in shards:
        with open(p, "rb") as f:
            json.loads(f.read(struct.unpack("<Q", f.read(8))[0]))
inspect_checkpoint(folder); floor()                      # warm page cache and lazy imports
out = {{"inspect": [], "floor": []}}
for _ in range(runs):
    for key, fn in (("inspect", lambda: inspect_checkpoint(folder)), ("floor", floor)):
        gc.collect()
        t = time.perf_counter(); fn(); out[key].append(time.perf_counter() - t)
print(json.dumps(out))
"""


def _layout(tensors: int) -> tuple[int, int]:
    """(layers, experts) giving about `tensors` tensors: 12 per expert, 27 per layer besides."""
    layers = max(2, round(math.sqrt(tensors / 12 / 2)))
    experts = max(2, round((tensors / layers - 27) / 12))
    return layers, experts


def _tensors(layers: int, experts: int) -> list[tuple[str, str, list]]:
    """ModelOpt NVFP4 layout: weight U8 [N, K/2], weight_scale F8_E4M3 [N, K/16], F32 scalar global scales."""
    out = [("model.embed_tokens.weight", "BF16", [VOCAB, H]), ("model.norm.weight", "BF16", [H]),
           ("lm_head.weight", "BF16", [VOCAB, H])]

    def lin(p, n, k):
        out.extend([(f"{p}.weight", "U8", [n, k // 2]), (f"{p}.weight_scale", "F8_E4M3", [n, k // 16]),
                    (f"{p}.weight_scale_2", "F32", []), (f"{p}.input_scale", "F32", [])])

    for i in range(layers):
        p = f"model.layers.{i}"
        out += [(f"{p}.input_layernorm.weight", "BF16", [H]), (f"{p}.post_attention_layernorm.weight", "BF16", [H]),
                (f"{p}.self_attn.q_norm.weight", "BF16", [HD]), (f"{p}.self_attn.k_norm.weight", "BF16", [HD]),
                (f"{p}.mlp.gate.weight", "BF16", [experts, H])]
        for name, n, k in (("q_proj", HEADS * HD, H), ("k_proj", KVH * HD, H), ("v_proj", KVH * HD, H),
                           ("o_proj", H, HEADS * HD)):
            lin(f"{p}.self_attn.{name}", n, k)
        for e in range(experts):
            for name, n, k in (("gate_proj", INTER, H), ("up_proj", INTER, H), ("down_proj", H, INTER)):
                lin(f"{p}.mlp.experts.{e}.{name}", n, k)
    return out


def build(folder: str, tensors: int) -> dict:
    """Write the checkpoint; returns its tensor count, shard paths and header bytes."""
    os.makedirs(folder, exist_ok=True)
    layers, experts = _layout(tensors)
    entries = _tensors(layers, experts)
    nshards = max(1, round(len(entries) / PER_SHARD))
    weight_map, total, paths, header_bytes = {}, 0, [], 0
    for s in range(nshards):
        fname = f"model-{s + 1:05d}-of-{nshards:05d}.safetensors"
        hdr, pos = {"__metadata__": {"format": "pt"}}, 0
        for name, dt, shape in entries[s * len(entries) // nshards:(s + 1) * len(entries) // nshards]:
            nb = math.prod(shape) * BITS[dt] // 8
            hdr[name] = {"dtype": dt, "shape": shape, "data_offsets": [pos, pos + nb]}
            pos += nb
            weight_map[name] = fname
        body = json.dumps(hdr, separators=(",", ":")).encode()
        body += b" " * (-len(body) % 8)
        path = os.path.join(folder, fname)
        with open(path, "wb") as f:
            f.write(struct.pack("<Q", len(body)) + body)
        os.truncate(path, 8 + len(body) + pos)           # the data region is a hole: reads give zeros
        total += pos
        paths.append(path)
        header_bytes += len(body)
    with open(os.path.join(folder, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f)
    cfg = {"architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe", "hidden_size": H,
           "intermediate_size": INTER * 4, "moe_intermediate_size": INTER, "num_hidden_layers": layers,
           "num_attention_heads": HEADS, "num_key_value_heads": KVH, "head_dim": HD, "vocab_size": VOCAB,
           "num_experts": experts, "num_experts_per_tok": 2, "decoder_sparse_step": 1, "mlp_only_layers": [],
           "tie_word_embeddings": False, "torch_dtype": "bfloat16"}
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(cfg, f)
    with open(os.path.join(folder, "hf_quant_config.json"), "w") as f:
        json.dump({"producer": {"name": "modelopt", "version": "0.47.0"},
                   "quantization": {"quant_algo": "NVFP4", "kv_cache_quant_algo": "FP8", "group_size": 16,
                                    "exclude_modules": ["lm_head", "model.layers.*.mlp.gate"]}}, f)
    return {"tensors": len(entries), "shards": paths, "header_bytes": header_bytes}


def _fresh(commands: list[list[str]], runs: int) -> list[tuple[float, float]]:
    """Per command, the median wall time and median CPU time (user + system) of a fresh process (stdout
    discarded; a failure stops the benchmark). The commands take turns run by run, so each median is taken over
    the same stretch of time (a shared VM's speed drifts by 10-20 % over a minute). The CPU time is what a
    busy machine distorts least."""
    times: list[list[float]] = [[] for _ in commands]
    cpus: list[list[float]] = [[] for _ in commands]
    for _ in range(runs):
        for argv, wall, cpu in zip(commands, times, cpus):
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            t = time.perf_counter()
            subprocess.run(argv, cwd=ROOT, stdout=subprocess.DEVNULL, check=True)
            wall.append(time.perf_counter() - t)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    return [(statistics.median(w), statistics.median(c)) for w, c in zip(times, cpus)]


def _in_process(folder: str, shards: list[str], runs: int, mode: str):
    r = subprocess.run([sys.executable, "-c", _IN_PROCESS.format(root=ROOT), folder, ",".join(shards), str(runs),
                        mode], cwd=ROOT, capture_output=True, text=True, check=True)
    return json.loads(r.stdout)


def measure(folder: str, ck: dict, runs: int) -> dict:
    (inspect_s, inspect_cpu), (floor_s, floor_cpu) = _fresh(
        [[sys.executable, "-m", "advisor", "inspect", folder, "--json"], [sys.executable, "-c", FLOOR, *ck["shards"]]],
        runs)
    warm = _in_process(folder, ck["shards"], runs, "times")
    base, peak = _in_process(folder, ck["shards"], 1, "rss")
    ip, fl = statistics.median(warm["inspect"]), statistics.median(warm["floor"])
    growth = (peak - base) * 1024                      # KiB
    return {"tensors": ck["tensors"], "shards": len(ck["shards"]), "header_bytes": ck["header_bytes"],
            "fresh_inspect_s": round(inspect_s, 4), "fresh_floor_s": round(floor_s, 4),
            "fresh_ratio": round(inspect_s / floor_s, 2),
            "fresh_inspect_cpu_s": round(inspect_cpu, 4), "fresh_floor_cpu_s": round(floor_cpu, 4),
            "fresh_cpu_ratio": round(inspect_cpu / floor_cpu, 2) if floor_cpu else None,
            "inproc_inspect_s": round(ip, 4), "inproc_floor_s": round(fl, 4), "inproc_ratio": round(ip / fl, 2),
            "inproc_us_per_tensor": round(ip / ck["tensors"] * 1e6, 2),
            "rss_growth_bytes": growth, "rss_over_header": round(growth / ck["header_bytes"], 2)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--sizes", default="3000,19000,100000", help="approximate tensor counts, comma-separated")
    ap.add_argument("--keep", help="build the checkpoints here and keep them")
    ap.add_argument("--smoke", action="store_true", help="tiny sizes, one run, no targets (CI)")
    args = ap.parse_args()
    # bytecode present, as the set-up leaves it (.ci/dev runs compileall): under PYTHONDONTWRITEBYTECODE the
    # fresh processes would compile every module edited since set-up, on every run
    subprocess.run([sys.executable, "-m", "compileall", "-q", "-j", "0", "advisor", "launchers", "profiles",
                    "kernels"], cwd=ROOT, stdout=subprocess.DEVNULL, check=False)
    if args.smoke:
        args.runs, args.sizes = 1, "300,900"
    sizes = [int(s) for s in args.sizes.split(",")]
    root = args.keep or tempfile.mkdtemp(prefix="inspect-bench-")
    try:
        rows = [measure(os.path.join(root, f"n{n}"), build(os.path.join(root, f"n{n}"), n), args.runs)
                for n in sizes]
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    small, large = rows[0], rows[-1]
    summary = {
        "runs": args.runs, "python": sys.version.split()[0], "cpus": os.cpu_count(),
        "floor_ratio_at_largest": large["fresh_ratio"], "floor_ratio_target": FLOOR_RATIO,
        "floor_cpu_ratio_at_largest": large["fresh_cpu_ratio"],
        "per_tensor_largest_over_smallest": round(large["inproc_us_per_tensor"] / small["inproc_us_per_tensor"], 2),
        "linear_target": LINEAR_RATIO,
        "rss_over_header_at_largest": large["rss_over_header"], "memory_target": MEMORY_RATIO,
    }
    summary["meets_targets"] = (summary["floor_ratio_at_largest"] <= FLOOR_RATIO
                                and summary["per_tensor_largest_over_smallest"] <= LINEAR_RATIO
                                and summary["rss_over_header_at_largest"] <= MEMORY_RATIO)
    print(json.dumps({"sizes": rows, "summary": summary}, indent=2))
    return 0 if args.smoke or summary["meets_targets"] else 1


if __name__ == "__main__":
    sys.exit(main())
