"""How long `plan` takes end to end for one checkpoint x GPU x workload (target: <= 0.5 s median).

Two measurements, medians over repeats:
  in-process  inspect + explain (+ one explain per candidate KV dtype) + make_plan: the first call
              (loads the GPU table, rules and profiles) and later calls with caches warm as in the
              TUI; and make_plan alone
  cli         `python -m advisor plan ... --json` in a fresh interpreter (imports, YAML loads, probe)

Usage: python benchmarks/plan_speed.py [--repeats N] [--checkpoint demo:NAME] [--gpu ID] [--workload W]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

TARGET_S = 0.5
ROOT = Path(__file__).resolve().parents[1]


def in_process(checkpoint: str, gpu_id: str, workload: str, engine: str) -> tuple[float, float]:
    from advisor.checkpoint.inspect import inspect_checkpoint
    from advisor.commands.plan import kv_decisions
    from advisor.cost.engine_profile import load_engine_memory
    from advisor.cost.plan import make_plan
    from advisor.cost.workload import get_workload
    from advisor.gpu_table import get_gpu
    from advisor.kernel_path.explain import explain

    t0 = time.perf_counter()
    ck = inspect_checkpoint(checkpoint)
    gpu = get_gpu(gpu_id)
    eng = load_engine_memory(engine)
    ex = explain(ck, gpu, engine=engine)
    kvd = kv_decisions(ck, gpu, 1, engine, None, eng.kv_tune)
    t1 = time.perf_counter()
    make_plan(ck, ex, gpu, workload=get_workload(workload), kv_decisions=kvd, engine_memory=eng)
    t2 = time.perf_counter()
    return t2 - t0, t2 - t1


def cli(checkpoint: str, gpu_id: str, workload: str, engine: str) -> float:
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "advisor", "plan", checkpoint, "--gpu", gpu_id, "--workload", workload,
                    "--engine", engine, "--json"], cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--checkpoint", default="demo:qwen3-30b-a3b-nvfp4")
    ap.add_argument("--gpu", default="rtx-3090")
    ap.add_argument("--workload", default="agents")
    ap.add_argument("--engine", default="vllm")
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    cold = in_process(args.checkpoint, args.gpu, args.workload, args.engine)[0]   # loads YAML, fills caches
    runs = [in_process(args.checkpoint, args.gpu, args.workload, args.engine) for _ in range(args.repeats)]
    total = statistics.median(r[0] for r in runs)
    core = statistics.median(r[1] for r in runs)
    shell = statistics.median(cli(args.checkpoint, args.gpu, args.workload, args.engine)
                              for _ in range(max(3, args.repeats // 2)))
    print(f"plan {args.checkpoint} on {args.gpu}, {args.engine}, workload {args.workload}")
    print(f"  in-process first call (cold)  {cold:.3f} s  ratio to target {cold / TARGET_S:.2f}")
    print(f"  in-process end to end (warm)  median {total:.3f} s  ratio to target {total / TARGET_S:.2f}")
    print(f"  make_plan alone               median {core:.3f} s  ratio to target {core / TARGET_S:.2f}")
    print(f"  cli, fresh interpreter        median {shell:.3f} s  ratio to target {shell / TARGET_S:.2f}")
    return 0 if total <= TARGET_S else 1


if __name__ == "__main__":
    sys.exit(main())
