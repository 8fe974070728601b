"""Whole Triton microbenchmark suite on one GPU in under 5 minutes; a short table is printed last.

Run from the repository root on a machine with an NVIDIA GPU and torch + triton installed
(the project itself need not be installed):

    python benchmarks/microbench_gpu.py                 # default shape 5120x17408, M 1..8192
    python benchmarks/microbench_gpu.py --m 1,16,8192 --shape 4096x14336 --json out.json

Progress goes to stderr; the full JSON document is written to --json (default
microbench-<gpu>.json in the current directory); the calibration is saved to the user data dir
unless --no-save. Exit 0 also without a GPU (one line says so), so it can run anywhere.
--smoke: M=1 on one 1024x1024 shape, a 10 s budget, nothing saved (CI runs this so it cannot rot).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def _shape(text: str):
    from advisor.microbench.shapes import Shape

    try:
        k, n = (int(x) for x in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected KxN, e.g. 5120x17408, got {text!r}") from None
    return Shape(k, n, "cli")


def main(argv=None) -> int:
    from advisor.microbench.shapes import DEFAULT_M, default_shapes, parse_m_list

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--m", default=None, help="comma-separated M values (default 1,4,16,128,2048,8192)")
    p.add_argument("--shape", type=_shape, action="append", help="KxN (repeatable; default 5120x17408)")
    p.add_argument("--budget", type=float, default=270.0, help="seconds for the measurements (default 270)")
    p.add_argument("--device", type=int, default=0)
    p.add_argument("--json", type=Path, default=None, help="where to write the JSON document")
    p.add_argument("--no-save", action="store_true", help="do not save the calibration file")
    p.add_argument("--smoke", action="store_true", help="M=1, one small shape, 10 s, nothing saved")
    args = p.parse_args(argv)
    if args.smoke:
        import tempfile

        args.m, args.shape, args.budget, args.no_save = "1", [_shape("1024x1024")], 10.0, True
        args.json = args.json or Path(tempfile.mkdtemp()) / "microbench-smoke.json"

    from advisor.services.microbench import gpu_unavailable, resolve_spec

    reason = gpu_unavailable()
    if reason:
        print(f"No GPU benchmark: {reason}; nothing measured.")
        return 0

    from datetime import datetime, timezone

    from advisor.jsonout import document, dumps
    from advisor.microbench import results, runner

    def progress(done, total, label):
        sys.stderr.write(f"[{done:3d}/{total}] {time.monotonic() - t0:6.1f}s {label}\n")
        sys.stderr.flush()

    t0 = time.monotonic()
    dev = runner.cuda_device(args.device)
    spec, gpu_id = resolve_spec(dev.name, dev.uuid)
    ms = parse_m_list(args.m) if args.m else DEFAULT_M
    suite = runner.run_suite(tuple(args.shape or default_shapes()), ms, dev=dev, spec=spec, gpu_id=gpu_id,
                             budget_s=args.budget, progress=progress)
    cal = results.calibration_from(suite, datetime.now(timezone.utc).isoformat(timespec="seconds"))
    cal_path = None
    if cal is not None and not args.no_save:
        try:
            from advisor.calibration import save_calibration

            cal_path = str(save_calibration(cal))
        except ImportError as exc:            # platformdirs missing: the JSON still has it
            print(f"calibration not saved ({exc})", file=sys.stderr)
    out = args.json or Path(f"microbench-{gpu_id}.json")
    out.write_text(dumps(document("microbench", results.to_payload(suite, cal, cal_path))), encoding="utf-8")
    for note in suite.notes:
        print(f"note: {note}")
    print(f"timing: {suite.timing}; total {time.monotonic() - t0:.0f} s; JSON: {out}"
          + (f"; calibration: {cal_path}" if cal_path else ""))
    if cal is not None:
        eff = ", ".join(f"{k} {v:.0%}" for k, v in cal.kernel_bandwidth_eff.items())
        print(f"M=1 bandwidth efficiency (of copy {cal.bandwidth_gbs:.0f} GB/s): {eff} (the weight-only classes are "
              "our Triton kernels: plan shows them, it does not take them for the engine's)")
        if cal.dequant_overhead:
            print("dequant overhead at large M: " + ", ".join(f"{k} {v:+.0%}" for k, v in cal.dequant_overhead.items()))
    print(results.short_table(suite))
    return 0


if __name__ == "__main__":
    sys.exit(main())
