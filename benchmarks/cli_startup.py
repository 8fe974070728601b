"""Cold-start time of the CLI: `python -m advisor --help` (target 0.3 s, issue 2).

Runs each command N times in fresh subprocesses and prints the median wall time and its ratio to
the target. Also times `probe --json` when that command exists (reported against the same
target; it fails the run only with --strict-probe, since it talks to the driver). Exits 1 when
a gated median is over target.

    python benchmarks/cli_startup.py [-n 15] [--target 0.3] [--strict-probe] [--smoke]

--smoke: one run of each, no target (CI runs this so the script cannot rot).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def time_command(argv: list[str], runs: int) -> tuple[float, list[float], int]:
    """Median seconds over `runs` fresh processes (one warm-up run first, not counted)."""
    samples = []
    rc = 0
    for i in range(runs + 1):
        t0 = time.perf_counter()
        proc = subprocess.run(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        elapsed = time.perf_counter() - t0
        rc = rc or proc.returncode
        if i:  # the first run warms the bytecode and file caches
            samples.append(elapsed)
    return statistics.median(samples), samples, rc


def has_probe() -> bool:
    sys.path.insert(0, str(ROOT))
    import importlib.util

    return importlib.util.find_spec("advisor.commands.probe") is not None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", "--runs", type=int, default=15)
    ap.add_argument("--target", type=float, default=0.3, help="seconds (default 0.3)")
    ap.add_argument("--strict-probe", action="store_true", help="also fail when `probe --json` is over target")
    ap.add_argument("--smoke", action="store_true", help="one run each, no target")
    args = ap.parse_args(argv)
    # bytecode present, as the set-up leaves it (.ci/dev runs compileall): under PYTHONDONTWRITEBYTECODE the
    # uncounted first run writes none, and each counted run would compile every module edited since set-up
    subprocess.run([sys.executable, "-m", "compileall", "-q", "-j", "0", "advisor", "launchers", "profiles",
                    "kernels"], cwd=ROOT, stdout=subprocess.DEVNULL, check=False)
    if args.smoke:
        args.runs = 1

    cases = [("--help", [sys.executable, "-m", "advisor", "--help"], True)]
    if has_probe():
        cases.append(("probe --json", [sys.executable, "-m", "advisor", "probe", "--json"], args.strict_probe))

    print(f"{'command':<16}{'median s':>10}{'min s':>9}{'max s':>9}{'ratio':>8}  verdict  "
          f"(target {args.target} s, n={args.runs})")
    failed = False
    for label, cmd, gated in cases:
        median, samples, rc = time_command(cmd, args.runs)
        ratio = median / args.target
        over = ratio > 1.0
        verdict = "FAIL" if (over and gated) else ("over" if over else "ok")
        if rc != 0:
            verdict += f" (exit {rc})"
            failed = failed or gated
        failed = failed or (over and gated)
        print(f"{label:<16}{median:>10.3f}{min(samples):>9.3f}{max(samples):>9.3f}{ratio:>8.2f}  {verdict}")
    return 1 if failed and not args.smoke else 0


if __name__ == "__main__":
    sys.exit(main())
