"""Speed of `explain`: one checkpoint x one GPU (target <= 0.1 s) and the all-GPUs listing (<= 1 s).

Usage: python benchmarks/explain_speed.py [--checkpoint demo:NAME] [--engine vllm] [--repeat 20] [--smoke]
--smoke: one call of each, no targets (CI runs this so the script cannot rot).
Prints medians (warm: rule files cached, as in the TUI) plus the cold first call, and the ratio to
each target; exits 1 when a median misses its target.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time


def _median(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--checkpoint", default="demo:qwen3-30b-a3b-nvfp4")
    ap.add_argument("--gpu", default="rtx-3090")
    ap.add_argument("--engine", default="vllm")
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--smoke", action="store_true", help="one call each, no targets")
    args = ap.parse_args(argv)
    if args.smoke:
        args.repeat = 1

    from advisor.checkpoint.inspect import inspect_checkpoint
    from advisor.gpu_table import get_gpu, load_gpu_table
    from advisor.kernel_path import rule_files
    from advisor.kernel_path.explain import explain, explain_all_gpus

    info = inspect_checkpoint(args.checkpoint)
    gpu = get_gpu(args.gpu)
    table = load_gpu_table()

    rule_files._load_cached.cache_clear()
    t = time.perf_counter()
    explain(info, gpu, engine=args.engine)
    cold = time.perf_counter() - t

    one = _median(lambda: explain(info, gpu, engine=args.engine), args.repeat)
    every = _median(lambda: explain_all_gpus(info, args.engine, table=table),
                    max(1 if args.smoke else 3, args.repeat // 4))

    rows = [("explain, 1 checkpoint x 1 GPU (cold, loads rules)", cold, 0.1),
            ("explain, 1 checkpoint x 1 GPU (median)", one, 0.1),
            (f"explain_all_gpus, {len(table)} GPUs (median)", every, 1.0)]
    print(f"checkpoint {args.checkpoint} ({info.label}), engine {args.engine}, gpu {gpu.id}")
    ok = True
    for label, secs, target in rows:
        ratio = secs / target
        print(f"{label:55s} {secs * 1000:8.2f} ms   target {target * 1000:6.0f} ms   ratio {ratio:5.2f}")
        if "median" in label and ratio > 1:
            ok = False
    return 0 if ok or args.smoke else 1


if __name__ == "__main__":
    sys.exit(main())
