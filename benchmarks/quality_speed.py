"""`quality` throughput and memory on a generated BF16 checkpoint and its NVFP4 twin.

usage: python benchmarks/quality_speed.py [--size-gb 1] [--hidden 4096] [--repeats 2]

Generates a Llama-shaped BF16 checkpoint (benchmarks/convert_speed.py's generator), converts it
to NVFP4 once, then runs `quality BF16 NVFP4` REPEATS times in a child process each and reports
medians: reference GB/s per core (BF16 bytes / CPU seconds: two passes over the reference, the
dequantization, the round-to-nearest baseline and the statistics) and peak RSS against the
bound 0.5 GB + 2 x largest tensor. The memory bound is the point: `quality` streams row chunks,
so its RSS must not grow with the model (pages of memory-mapped files are counted while touched).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from convert_speed import generate, run_once as convert_once  # noqa: E402

CHILD = """
import sys, json, time
sys.path.insert(0, {root!r})
from pathlib import Path
from advisor.quality.compare import compare
t = time.perf_counter()
r = compare(Path({ref!r}), Path({cand!r}))
print(json.dumps({{"seconds": time.perf_counter() - t, "status": r.verdict.status, "tensors": len(r.tensors)}}))
"""


def run_once(ref: Path, cand: Path) -> dict:
    proc = subprocess.Popen([sys.executable, "-c", CHILD.format(root=str(ROOT), ref=str(ref), cand=str(cand))],
                            stdout=subprocess.PIPE, text=True)
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit("quality failed")
    res = json.loads(out.strip().splitlines()[-1])
    res["cpu_seconds"] = usage.ru_utime + usage.ru_stime
    res["peak_rss"] = usage.ru_maxrss * 1024
    return res


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-gb", type=float, default=1.0)
    ap.add_argument("--hidden", type=int, default=4096)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--dir", type=Path, default=None, help="work folder (default: a temporary one)")
    ap.add_argument("--smoke", action="store_true", help="tiny sizes, one run, no target (CI: cannot rot)")
    args = ap.parse_args()
    if args.smoke:
        args.size_gb, args.hidden, args.repeats = 0.02, 256, 1
    with tempfile.TemporaryDirectory(prefix="nvfp4-quality-", dir=args.dir) as tmp:
        ref, cand = Path(tmp) / "bf16", Path(tmp) / "nvfp4"
        ref.mkdir()
        total, largest = generate(ref, args.size_gb, args.hidden)
        convert_once(ref, cand, 1)
        print(f"generated {total / 1e9:.2f} GB BF16 (largest tensor {largest / 1e6:.0f} MB) and its NVFP4 twin")
        runs = []
        for i in range(args.repeats):
            runs.append(run_once(ref, cand))
            r = runs[-1]
            print(f"run {i + 1}: {r['seconds']:.1f} s wall, {r['cpu_seconds']:.1f} s CPU, peak RSS "
                  f"{r['peak_rss'] / 1e9:.3f} GB, verdict {r['status']}")
    cpu = statistics.median(r["cpu_seconds"] for r in runs)
    rss = max(r["peak_rss"] for r in runs)
    bound = 0.5e9 + 2 * largest
    print(json.dumps({"reference_gb": round(total / 1e9, 3), "median_wall_s": round(statistics.median(
        r["seconds"] for r in runs), 2), "median_cpu_s": round(cpu, 2),
        "gb_per_s_per_core": round(total / cpu / 1e9, 3),
        "peak_rss_gb": round(rss / 1e9, 3), "rss_bound_gb": round(bound / 1e9, 3),
        "rss_within_bound": rss <= bound}, indent=1))
    return 0 if rss <= bound or args.smoke else 1


if __name__ == "__main__":
    sys.exit(main())
