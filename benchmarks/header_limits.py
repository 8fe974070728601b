"""Benchmark: the safetensors header reader below and at its limits (issue 21 points 10, 12).

    python benchmarks/header_limits.py [--runs 3]

1. Linearity: a header of N tiny tensors for N = 4,096 ... 262,144 (MAX_TENSORS); the time per
   tensor at the limit must stay within 2x of the time per tensor at 16,384, and reading the
   header at the limit may cost at most 4x a bare ``json.loads`` of the same bytes (a target that
   holds on a loaded machine too; the absolute time is printed).
2. Rank: a tensor of 64 dimensions (MAX_RANK), printed, and one of 100,000 dimensions, refused in
   at most 4x a bare ``json.loads`` of its header (the old reader took 26 s).
3. Memory: the worst headers under MAX_JSON_ITEMS (one object of 2.9 M members, 2.9 M empty
   lists, 5.9 M strings) and a 100 MB header past it, each in a fresh process: peak RSS growth
   <= 700 MB.

Prints medians and the ratio to each target; exits 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from advisor.checkpoint import safetensors_header as sh  # noqa: E402
from advisor.errors import BadInput  # noqa: E402

LINEAR_RATIO = 2.0
JSON_RATIO = 4.0
PEAK_MB = 700


def tiny_tensors(n: int) -> bytes:
    return ("{" + ",".join(f'"model.layers.{i}.weight":{{"dtype":"U8","shape":[1,1],"data_offsets":[{i},{i + 1}]}}'
                           for i in range(n)) + "}").encode()


def timed(raw: bytes, buffer: int, runs: int) -> tuple[float, float]:
    """Median seconds of our reader and of a bare json.loads of the same bytes."""
    ours, plain = [], []
    for _ in range(runs):
        t0 = time.perf_counter()
        try:
            sh.parse_header_bytes(raw, buffer, "bench.safetensors")
        except BadInput:
            pass
        t1 = time.perf_counter()
        json.loads(raw)
        ours.append(t1 - t0)
        plain.append(time.perf_counter() - t1)
    return statistics.median(ours), statistics.median(plain)


MEMORY = textwrap.dedent("""
    import resource, sys
    sys.path.insert(0, {root!r})
    from advisor.checkpoint.safetensors_header import parse_header_bytes
    from advisor.errors import BadInput
    kind, n = sys.argv[1], int(sys.argv[2])
    t = '"dtype":"U8","shape":[0],"data_offsets":[0,0]'
    raw = {{
        "members": lambda: ('{{"a":{{' + t + ',"x":{{' + ",".join(f'"k{{i}}":0' for i in range(n)) + '}}}}}}').encode(),
        "lists": lambda: ('{{"a":{{' + t + ',"x":[' + ",".join(["[]"] * n) + ']}}}}').encode(),
        "strings": lambda: ('{{"a":{{' + t + ',"x":[' + ",".join('"%d"' % i for i in range(n)) + ']}}}}').encode(),
        "past-limit": lambda: b'{{"a":{{"dtype":"U8","shape":[0],"data_offsets":[0,0],"x":[' + b"[]," * n + b"[]]}}}}",
    }}[kind]()
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    try:
        parse_header_bytes(raw, 0, "x")
        verdict = "accepted"
    except BadInput:
        verdict = "refused"
    print(verdict, (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base) // 1024)
""")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--smoke", action="store_true",
                    help="small headers, one run, memory part at 1/100 size, no targets (CI: cannot rot)")
    args = ap.parse_args()
    if args.smoke:
        args.runs = 1
    scale = 100 if args.smoke else 1
    ok = True

    print("1. time per tensor (median of runs)")
    per, over = {}, 1.0
    for n in ((4_096, 16_384) if args.smoke else (4_096, 16_384, 65_536, sh.MAX_TENSORS)):
        t, plain = timed(tiny_tensors(n), n, args.runs)
        per[n], over = t / n, t / plain
        print(f"   {n:>8,} tensors  {t:7.3f} s  {per[n] * 1e6:6.2f} us/tensor  {over:4.1f}x json.loads")
    ratio = per[max(per)] / per[16_384]
    print(f"   linearity: {ratio:.2f}x the per-tensor time at 16,384 (target <= {LINEAR_RATIO}) "
          f"-> {ratio / LINEAR_RATIO:.2f} of target")
    print(f"   at the limit: {over:.2f}x json.loads (target <= {JSON_RATIO}) -> {over / JSON_RATIO:.2f} of target")
    ok &= ratio <= LINEAR_RATIO and over <= JSON_RATIO

    print("2. rank")
    for rank, dim in ((sh.MAX_RANK, 2), (100_000, 2)):
        raw = json.dumps({"a": {"dtype": "U8", "shape": [dim] * rank, "data_offsets": [0, 0]}}).encode()
        t, plain = timed(raw, 0, max(args.runs, 5))
        r = t / plain
        if rank == sh.MAX_RANK:       # microseconds: fixed costs, no target
            print(f"   {rank:>7,} dims: {t * 1000:.2f} ms")
            continue
        print(f"   {rank:>7,} dims: {t * 1000:.2f} ms, {r:.1f}x json.loads (target <= {JSON_RATIO}) "
              f"-> {r / JSON_RATIO:.2f} of target")
        ok &= r <= JSON_RATIO

    print("3. peak memory of the worst headers (fresh processes)")
    code = MEMORY.format(root=str(ROOT))
    for kind, n in (("members", 2_900_000), ("lists", 2_900_000), ("strings", 5_900_000), ("past-limit", 33_000_000)):
        n //= scale
        out = subprocess.run([sys.executable, "-c", code, kind, str(n)], capture_output=True, text=True, timeout=600)
        verdict, mb = out.stdout.split()
        print(f"   {kind:>10}: {verdict}, +{mb} MB (target <= {PEAK_MB} MB) -> {int(mb) / PEAK_MB:.2f} of target")
        ok &= int(mb) <= PEAK_MB
    print("all targets met" if ok else "TARGET MISSED")
    return 0 if ok or args.smoke else 1


if __name__ == "__main__":
    sys.exit(main())
