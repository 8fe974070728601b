"""Compatibility matrix for the whole GPU table (target: <= 2 s median, issue 9).

Each run is a fresh process that imports the advisor, inspects a demo checkpoint and computes
the matrix (explain + make_plan for every GPU x engine, incl. the per-KV-dtype attention
decisions the tuner needs); it reports the time of the matrix itself and of the whole process.
Prints medians and their ratio to the target; exits 1 when the matrix median is over it.

    python benchmarks/report_matrix.py [-n 7] [--target 2.0] [--checkpoint demo:NAME] [--engines vllm,sglang,fastllm]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = """
import json, sys, time
t0 = time.perf_counter()
from advisor.checkpoint.inspect import inspect_checkpoint
from advisor.gpu_table import load_gpu_table
from advisor.report.matrix import compute_matrix
table = load_gpu_table()
gpus = list(table.values()) if isinstance(table, dict) else list(table)
ck = inspect_checkpoint(sys.argv[1])
t1 = time.perf_counter()
m = compute_matrix(ck, gpus, tuple(sys.argv[2].split(",")), workload="interactive")
t2 = time.perf_counter()
print(json.dumps({"matrix_s": t2 - t1, "setup_s": t1 - t0, "cells": len(m.cells),
                  "predicted": sum(c.decode_tok_s is not None for c in m.cells)}))
"""


def run_once(checkpoint: str, engines: str) -> dict:
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", CHILD, checkpoint, engines], cwd=ROOT, capture_output=True,
                          text=True, check=True)
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    out["process_s"] = time.perf_counter() - t0
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", "--runs", type=int, default=7)
    ap.add_argument("--target", type=float, default=2.0, help="seconds for the matrix (default 2.0)")
    ap.add_argument("--checkpoint", default="demo:qwen3-30b-a3b-nvfp4")
    ap.add_argument("--engines", default="vllm,sglang,fastllm")
    ap.add_argument("--smoke", action="store_true",
                    help="one run, one engine, no warm-up, no target (CI runs this so the script cannot rot)")
    args = ap.parse_args(argv)
    if args.smoke:
        args.runs, args.engines = 1, args.engines.split(",")[0]
    else:
        run_once(args.checkpoint, args.engines)      # warm the bytecode and file caches
    runs = [run_once(args.checkpoint, args.engines) for _ in range(args.runs)]
    matrix = [r["matrix_s"] for r in runs]
    process = [r["process_s"] for r in runs]
    med = statistics.median(matrix)
    print(f"checkpoint {args.checkpoint}, engines {args.engines}: {runs[0]['cells']} cells, "
          f"{runs[0]['predicted']} with a prediction, n={args.runs}")
    print(f"{'':<22}{'median s':>10}{'min s':>9}{'max s':>9}{'ratio':>8}")
    print(f"{'matrix':<22}{med:>10.3f}{min(matrix):>9.3f}{max(matrix):>9.3f}{med / args.target:>8.2f}  "
          f"{'smoke: no target' if args.smoke else 'ok' if med <= args.target else 'FAIL'} (target {args.target} s)")
    pmed = statistics.median(process)
    print(f"{'whole process':<22}{pmed:>10.3f}{min(process):>9.3f}{max(process):>9.3f}{pmed / args.target:>8.2f}  "
          "(imports + inspect + matrix; informational)")
    return 0 if med <= args.target or args.smoke else 1


if __name__ == "__main__":
    sys.exit(main())
