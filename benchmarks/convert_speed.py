"""Converter throughput and memory on a generated multi-GB BF16 checkpoint.

usage: python benchmarks/convert_speed.py [--size-gb 2] [--hidden 4096] [--threads 1] [--repeats 3]

Generates a Llama-shaped BF16 checkpoint (random weights, 1 GB shards) in a temporary folder,
converts it REPEATS times in a child process each (so peak RSS is the conversion's own), and
reports medians:
- GB/s per core: BF16 input bytes / CPU seconds (user + system) of the child; target >= 0.3;
- wall GB/s (with --threads N the work is spread over N cores);
- peak RSS against the bound 2 x largest tensor + 0.5 GB.
The source files are in the page cache after generation, so this measures compute, not the disk.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from advisor.convert.nvfp4_math import f32_to_bf16  # noqa: E402
from advisor.convert.safetensors_io import OutSpec, ShardWriter  # noqa: E402

TARGET_GBPS_PER_CORE = 0.3


def layer_shapes(h: int) -> dict[str, tuple[int, int]]:
    inter, kv = int(h * 2.6875) // 128 * 128, h // 4
    return {"self_attn.q_proj": (h, h), "self_attn.k_proj": (kv, h), "self_attn.v_proj": (kv, h),
            "self_attn.o_proj": (h, h), "mlp.gate_proj": (inter, h), "mlp.up_proj": (inter, h),
            "mlp.down_proj": (h, inter)}


def generate(folder: Path, size_gb: float, h: int, vocab: int = 32000) -> tuple[int, int]:
    """Write the checkpoint; returns (total bytes, largest tensor bytes)."""
    rng = np.random.default_rng(0)
    per_layer = sum(n * k * 2 for n, k in layer_shapes(h).values()) + 2 * h * 2
    fixed = 2 * vocab * h * 2 + h * 2
    layers = max(1, int((size_gb * 1e9 - fixed) // per_layer))
    specs: list[OutSpec] = [OutSpec("model.embed_tokens.weight", "BF16", (vocab, h))]
    for i in range(layers):
        specs += [OutSpec(f"model.layers.{i}.{n}.weight", "BF16", s) for n, s in layer_shapes(h).items()]
        specs += [OutSpec(f"model.layers.{i}.input_layernorm.weight", "BF16", (h,)),
                  OutSpec(f"model.layers.{i}.post_attention_layernorm.weight", "BF16", (h,))]
    specs += [OutSpec("model.norm.weight", "BF16", (h,)), OutSpec("lm_head.weight", "BF16", (vocab, h))]
    shards, cur, size = [], [], 0
    for s in specs:
        if cur and size + s.nbytes > 1e9:
            shards.append(cur)
            cur, size = [], 0
        cur.append(s)
        size += s.nbytes
    shards.append(cur)
    wm = {}
    for i, group in enumerate(shards, 1):
        fname = f"model-{i:05d}-of-{len(shards):05d}.safetensors"
        w = ShardWriter(folder / fname, group, {"format": "pt"})
        for s in group:
            rows = s.shape[0]
            step = max(1, (8 << 20) // max(1, s.nbytes // rows))
            for a in range(0, rows, step):
                part = (rng.standard_normal((min(rows, a + step) - a, *s.shape[1:]), np.float32) * 0.02)
                w.write(s.name, f32_to_bf16(part))
            wm[s.name] = fname
        w.close()
    total = sum(s.nbytes for s in specs)
    (folder / "model.safetensors.index.json").write_text(json.dumps({"metadata": {"total_size": total}, "weight_map": wm}))
    (folder / "config.json").write_text(json.dumps({"model_type": "llama", "hidden_size": h, "num_hidden_layers": layers}))
    return total, max(s.nbytes for s in specs)


CHILD = """
import sys, json, time
sys.path.insert(0, {root!r})
from pathlib import Path
from advisor.convert.converter import convert
from advisor.convert.plan import Options
t = time.perf_counter()
r = convert(Path({src!r}), Path({dst!r}), options=Options(threads={threads}))
print(json.dumps({{"seconds": time.perf_counter() - t, "output_bytes": r.output_bytes}}))
"""


def run_once(src: Path, dst: Path, threads: int) -> dict:
    code = CHILD.format(root=str(ROOT), src=str(src), dst=str(dst), threads=threads)
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"conversion failed (exit {proc.returncode})")
    res = json.loads(out.strip().splitlines()[-1])
    res["cpu_seconds"] = usage.ru_utime + usage.ru_stime
    res["peak_rss"] = usage.ru_maxrss * 1024
    return res


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-gb", type=float, default=2.0)
    ap.add_argument("--hidden", type=int, default=4096)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--dir", type=Path, default=None, help="work folder (default: a temporary one)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="nvfp4-bench-", dir=args.dir) as tmp:
        src = Path(tmp) / "bf16"
        src.mkdir()
        t0 = time.perf_counter()
        total, largest = generate(src, args.size_gb, args.hidden)
        print(f"generated {total / 1e9:.2f} GB BF16 in {time.perf_counter() - t0:.1f} s "
              f"(largest tensor {largest / 1e6:.0f} MB)")
        runs = []
        for i in range(args.repeats):
            dst = Path(tmp) / f"out{i}"
            runs.append(run_once(src, dst, args.threads))
            r = runs[-1]
            print(f"run {i + 1}: {r['seconds']:.2f} s wall, {r['cpu_seconds']:.2f} s CPU, "
                  f"peak RSS {r['peak_rss'] / 1e9:.3f} GB")
            import shutil

            shutil.rmtree(dst)
    wall = statistics.median(r["seconds"] for r in runs)
    cpu = statistics.median(r["cpu_seconds"] for r in runs)
    rss = max(r["peak_rss"] for r in runs)
    per_core = total / cpu / 1e9
    bound = 2 * largest + 0.5e9
    print(json.dumps({
        "input_gb": round(total / 1e9, 3), "threads": args.threads, "repeats": args.repeats,
        "median_wall_s": round(wall, 3), "median_cpu_s": round(cpu, 3),
        "gb_per_s_wall": round(total / wall / 1e9, 3), "gb_per_s_per_core": round(per_core, 3),
        "target_gb_per_s_per_core": TARGET_GBPS_PER_CORE, "speed_ratio_to_target": round(per_core / TARGET_GBPS_PER_CORE, 2),
        "peak_rss_gb": round(rss / 1e9, 3), "rss_bound_gb": round(bound / 1e9, 3),
        "rss_ratio_to_bound": round(rss / bound, 3),
    }, indent=2))
    return 0 if per_core >= TARGET_GBPS_PER_CORE and rss <= bound else 1


if __name__ == "__main__":
    sys.exit(main())
