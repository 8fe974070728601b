"""NVFP4 and INT4 GEMVs on one GPU, v4 against v5: is each right, how fast is each (kernels/NOTES.md v5).

    python benchmarks/gemv_v5_check.py [--fmt nvfp4,int4] [--shape KxN ...] [--smoke]

v4: the fp32 block dot (NVFP4) and the fp16-scaled tile (INT4), i.e. `f16_block_sums=False`; v5:
packed fp16 block sums (HFMA2), what the microbench candidates use. For the microbench's GEMV tiles
(advisor/microbench/configs.py, M = 1; INT4 with groups of 128):

1. correctness against plain torch (`kernels.formats.reference_dequantize`, an fp32 matmul) on an
   even shape (every tile inside W: the PTX block dot runs) at M = 1 and 3, with Gaussian
   activations and with activations whose 16-blocks lie at powers of two from 2**-40 to 2**40
   (bf16 holds them; fp16 could not). Tolerance per output element, from the bounds in
   kernels/NOTES.md v5: |err| <= tol * sum_k |W a| + 2**-8 |ref| (the bf16 output rounding, when the
   output is bf16), tol = 10 * 2**-11 for v5 (bound 8-9 x 2**-11), for v4 2**-16 (NVFP4: fp32 sums;
   room for the reference's own fp32 matmul) and 2**-10 (INT4: each weight rounded to fp16, its
   contract). A miss prints FAIL and the script exits 1, as does a v5 result equal to v4's.
2. timing (triton.testing.do_bench_cudagraph, median of graph replays; weight copies called in
   turn, at least 3x L2 in all, so reads come from DRAM; a split-K launch includes zeroing its
   output, as in the microbench): microseconds per call, weight GB/s, and that as % of a
   device-to-device copy's GB/s (bytes read + written, do_bench of a 1 GiB copy).

Without a GPU (CI smoke): the correctness part on the CPU interpreter at a tiny shape, no timing.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--smoke", action="store_true", help="tiny sizes; on CPU when there is no GPU")
    ap.add_argument("--shape", action="append", default=None, help="KxN to time (default 5120x17408, 16384x53248)")
    ap.add_argument("--fmt", default="nvfp4,int4")
    args = ap.parse_args(argv)
    import torch

    gpu = torch.cuda.is_available()
    if not gpu:
        os.environ["TRITON_INTERPRET"] = "1"              # before kernels/ is imported
    import triton

    from advisor.microbench import configs
    from kernels import formats
    from kernels.weight_only import GemvConfig, gemv, gemv_even

    dev = "cuda" if gpu else "cpu"
    sms = torch.cuda.get_device_properties(0).multi_processor_count if gpu else 132
    print(f"device {torch.cuda.get_device_name(0) if gpu else 'cpu (interpreter)'}; torch {torch.__version__}, "
          f"triton {triton.__version__}")
    act = torch.bfloat16 if gpu else torch.float32      # the interpreter has no bf16 arithmetic
    g = torch.Generator(device=dev).manual_seed(1234)

    def configs_for(m, k, n):
        for c in configs.candidates(m, k, n, sms):
            if c.path == "gemv":
                p = dict(c.params)
                yield c.text, GemvConfig(**{**p, "f16_block_sums": False}), GemvConfig(**{**p, "f16_block_sums": True})

    # ---------------------------------------------------------------- correctness
    n, k = (64, 512) if not gpu else (2048, 4096)
    ok = True
    for fmt in args.fmt.split(","):
        w = formats.random_weight(fmt, n, k, dev, g)
        ref_w = formats.reference_dequantize(w)
        tol4 = 2.0**-16 if fmt == "nvfp4" else 2.0**-10
        for m in ((1,) if args.smoke else (1, 3)):
            for kind in ("gauss", "wide"):
                a = torch.randn((m, k), device=dev, generator=g)
                if kind == "wide":
                    e = torch.randint(-40, 41, (m, k // 16, 1), device=dev, generator=g).float()
                    a = (a.view(m, k // 16, 16) * torch.exp2(e)).view(m, k)
                a = a.to(act)
                ref = a.float() @ ref_w.t()
                mag = a.float().abs() @ ref_w.abs().t()
                for text, v4, v5 in configs_for(m, k, n):
                    if args.smoke and not text.startswith("gemv 64x128"):
                        continue
                    outs = {}
                    for name, cfg, tol in (("v4", v4, tol4), ("v5", v5, 10 * 2.0**-11)):
                        out = outs[name] = gemv(a, w, cfg).float()
                        err = (out - ref).abs()
                        allowed = tol * mag + (2.0**-8 * ref.abs() if cfg.split_k == 1 and act != torch.float32 else 0)
                        worst = (err / allowed.clamp_min(1e-30)).max().item()
                        rel = (err.max() / ref.abs().max()).item()
                        good = bool((err <= allowed).all()) and bool(torch.isfinite(out).all())
                        ok &= good
                        print(f"check {'ok  ' if good else 'FAIL'} {fmt:5} {name} {text:24} M={m} {kind:5} {n}x{k}: "
                              f"max|err|/max|ref| {rel:.1e}, worst err/allowed {worst:.2f}")
                    if gemv_even(w, v5.block_n, v5.block_k, w.ws) and torch.equal(outs["v4"], outs["v5"]):
                        ok = False               # fp16 block sums never match v4's on random data
                        print(f"check FAIL {fmt} v5 {text}: output identical to v4's, so v5's block dot did not run")
    if not gpu:
        print("no CUDA device: correctness checked on the CPU interpreter only, nothing timed")
        return 0 if ok else 1

    # ---------------------------------------------------------------- timing
    from triton.testing import do_bench, do_bench_cudagraph

    def bench_ms(fn) -> float:
        """Median ms of fn replayed in a CUDA graph (no Python launch overhead in the figure); plain
        do_bench if the capture fails."""
        try:
            return do_bench_cudagraph(fn, return_mode="median")
        except Exception as exc:  # noqa: BLE001 - a failed capture still gets a timing
            print(f"(CUDA graph capture failed, {type(exc).__name__}: timing with launches)")
            return do_bench(fn, return_mode="median")

    src = torch.empty(2**30 // 4, device=dev, dtype=torch.float32)
    dst = torch.empty_like(src)
    copy_gbs = 2 * src.numel() * 4 / (do_bench(lambda d=dst, s=src: d.copy_(s), return_mode="median") * 1e-3) / 1e9
    del src, dst
    print(f"copy (1 GiB, device to device): {copy_gbs:.0f} GB/s (read + written)")
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    shapes = args.shape or (["4096x4096"] if args.smoke else ["5120x17408", "16384x53248"])
    for fmt in args.fmt.split(","):
        for shape in shapes:
            k, n = (int(v) for v in shape.split("x"))
            w = formats.random_weight(fmt, n, k, dev, g)
            # copies of the weight, called in turn, so that each call reads from DRAM, not L2
            extra = min(7, -(-3 * l2 // w.nbytes()) - 1)
            copies = [w] + [formats.random_weight(fmt, n, k, dev, g) for _ in range(extra)]
            a = torch.randn((1, k), device=dev, generator=g).to(act)
            ref = a.float() @ formats.reference_dequantize(w).t()
            for text, v4, v5 in configs_for(1, k, n):
                row = []
                for name, cfg in (("v4", v4), ("v5", v5)):
                    out = gemv(a, w, cfg)
                    rel = ((out.float() - ref).abs().max() / ref.abs().max()).item()
                    outs = [torch.empty_like(out) for _ in copies]

                    def run(cfg=cfg, outs=outs, copies=copies, a=a):
                        for wc, o in zip(copies, outs):
                            gemv(a, wc, cfg, out=o)
                    ms = bench_ms(run) / len(copies)
                    gbs = w.nbytes() / (ms * 1e-3) / 1e9
                    row.append(f"{name} {ms * 1e3:7.1f} us {gbs:5.0f} GB/s {100 * gbs / copy_gbs:4.0f} % copy "
                               f"(rel err {rel:.0e})")
                print(f"time {fmt:5} {shape:12} {text:24} " + " | ".join(row) + f"  [{len(copies)} weight copies]")
            del copies, w
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
