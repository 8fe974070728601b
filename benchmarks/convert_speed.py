"""Converter throughput, scaling over --jobs, and memory, on a generated BF16 checkpoint.

usage: python benchmarks/convert_speed.py [--size-gb 2] [--hidden 4096] [--jobs 1,2] [--repeats 5]
                                          [--compare OTHER_TREE] [--smoke]

Generates a Llama-shaped BF16 checkpoint (random weights, 1 GB shards) in a temporary folder and
converts it REPEATS times per job count, each in a child process (so peak RSS is the
conversion's own), alternating the job counts run by run. Reports medians:
- GB/s per core: BF16 input bytes / CPU seconds (user + system, all threads) of the conversion
  call, measured inside the child; target >= 0.8 with one job. The child's whole-process figure
  (interpreter start and imports included) is printed beside it;
- wall GB/s per job count, and the speed-up over one job (the scaling);
- peak RSS (the child's maximum resident set) against 1.2 x the largest tensor + 0.5 GB.
The source files are in the page cache after generation, so this measures compute, not the disk.
--compare DIR also converts with the `advisor` package of another source tree (e.g. an older
commit unpacked with `git archive`), alternating with this one, and prints the ratios.
--smoke: a tiny checkpoint, one run per job count, no targets (CI runs this so the script cannot rot).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
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

TARGET_GBPS_PER_CORE = 0.8


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
    index = {"metadata": {"total_size": total}, "weight_map": wm}
    (folder / "model.safetensors.index.json").write_text(json.dumps(index))
    config = {"model_type": "llama", "hidden_size": h, "num_hidden_layers": layers}
    (folder / "config.json").write_text(json.dumps(config))
    return total, max(s.nbytes for s in specs)


CHILD = """
import sys, json, time
sys.path.insert(0, {root!r})
from pathlib import Path
from advisor.convert.converter import convert
from advisor.convert.plan import Options
c, t = time.process_time(), time.perf_counter()
r = convert(Path({src!r}), Path({dst!r}), options=Options(threads={jobs}))
print(json.dumps({{"seconds": time.perf_counter() - t, "convert_cpu": time.process_time() - c,
                  "output_bytes": r.output_bytes}}))
"""


def run_once(src: Path, dst: Path, jobs: int, code_root: Path = ROOT) -> dict:
    code = CHILD.format(root=str(code_root), src=str(src), dst=str(dst), jobs=jobs)
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"conversion failed (exit {os.waitstatus_to_exitcode(status)})")
    res = json.loads(out.strip().splitlines()[-1])
    res["process_cpu"] = usage.ru_utime + usage.ru_stime
    res["peak_rss"] = usage.ru_maxrss * 1024
    return res


def summarize(runs: list[dict], total: int) -> dict:
    wall = statistics.median(r["seconds"] for r in runs)
    cpu = statistics.median(r["convert_cpu"] for r in runs)
    pcpu = statistics.median(r["process_cpu"] for r in runs)
    return {"runs": len(runs), "median_wall_s": round(wall, 3), "median_convert_cpu_s": round(cpu, 3),
            "gb_per_s_wall": round(total / wall / 1e9, 3), "gb_per_s_per_core": round(total / cpu / 1e9, 3),
            "gb_per_s_per_core_whole_process": round(total / pcpu / 1e9, 3),
            "peak_rss_gb": round(max(r["peak_rss"] for r in runs) / 1e9, 3)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-gb", type=float, default=2.0)
    ap.add_argument("--hidden", type=int, default=4096)
    ap.add_argument("--jobs", default=None, help="comma-separated job counts (default: 1 and the CPU count)")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--compare", type=Path, default=None, metavar="TREE",
                    help="also run the advisor package of this source tree, alternating, and print ratios")
    ap.add_argument("--dir", type=Path, default=None, help="work folder (default: a temporary one)")
    ap.add_argument("--smoke", action="store_true", help="tiny sizes, one run each, no targets")
    args = ap.parse_args()
    if args.smoke:
        args.size_gb, args.hidden, args.repeats = 0.02, 256, 1
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    jobs = sorted({int(j) for j in args.jobs.split(",")}) if args.jobs else sorted({1, cores})
    codes = {"this": ROOT} | ({"compare": args.compare.resolve()} if args.compare else {})
    with tempfile.TemporaryDirectory(prefix="nvfp4-bench-", dir=args.dir) as tmp:
        src = Path(tmp) / "bf16"
        src.mkdir()
        t0 = time.perf_counter()
        total, largest = generate(src, args.size_gb, args.hidden)
        print(f"generated {total / 1e9:.2f} GB BF16 in {time.perf_counter() - t0:.1f} s "
              f"(largest tensor {largest / 1e6:.0f} MB); {cores} CPU(s)")
        runs: dict[tuple[str, int], list[dict]] = {(c, j): [] for c in codes for j in jobs}
        for i in range(args.repeats):
            for (c, j), lst in runs.items():
                dst = Path(tmp) / "out"
                r = run_once(src, dst, j, codes[c])
                shutil.rmtree(dst)
                lst.append(r)
                print(f"run {i + 1} {c} jobs={j}: {r['seconds']:.2f} s wall, {r['convert_cpu']:.2f} s CPU "
                      f"converting ({r['process_cpu']:.2f} s whole process), peak RSS {r['peak_rss'] / 1e9:.3f} GB")
    bound = 1.2 * largest + 0.5e9
    result: dict = {"input_gb": round(total / 1e9, 3), "largest_tensor_gb": round(largest / 1e9, 3),
                    "cpus": cores, "rss_bound_gb": round(bound / 1e9, 3),
                    "target_gb_per_s_per_core": TARGET_GBPS_PER_CORE}
    for c in codes:
        rows = {j: summarize(runs[(c, j)], total) for j in jobs}
        one = rows[jobs[0]]["median_wall_s"]
        for j in jobs:
            rows[j]["speedup_vs_jobs_" + str(jobs[0])] = round(one / rows[j]["median_wall_s"], 2)
        result[c] = {f"jobs={j}": rows[j] for j in jobs}
    if args.compare:
        result["compare_over_this"] = {
            f"jobs={j}": {"cpu_per_byte_ratio": round(statistics.median(
                b["convert_cpu"] / a["convert_cpu"] for a, b in zip(runs[("this", j)], runs[("compare", j)])), 2),
                "wall_ratio": round(statistics.median(
                    b["seconds"] / a["seconds"] for a, b in zip(runs[("this", j)], runs[("compare", j)])), 2)}
            for j in jobs}
    ours = result["this"]
    per_core = ours[f"jobs={jobs[0]}"]["gb_per_s_per_core"] if jobs[0] == 1 else None
    rss = max(r["peak_rss_gb"] for r in ours.values()) * 1e9
    result["speed_ratio_to_target"] = round(per_core / TARGET_GBPS_PER_CORE, 2) if per_core else None
    result["rss_ratio_to_bound"] = round(rss / bound, 3)
    print(json.dumps(result, indent=2))
    if args.smoke:
        return 0
    return 0 if (per_core is None or per_core >= TARGET_GBPS_PER_CORE) and rss <= bound else 1


if __name__ == "__main__":
    sys.exit(main())
