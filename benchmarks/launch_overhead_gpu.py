"""Launch overhead on one GPU, measured: the fixed costs per kernel that `plan` charges as
step_overhead.graph_us_per_kernel and eager_us_per_kernel (profiles/engine_memory/*.yaml).

    python benchmarks/launch_overhead_gpu.py [--json out.json] [--smoke]

Three measurements, medians of timed repeats after warm-up, each on its own:
1. graph: N dependent small kernels (an in-place add on 1 x hidden bf16, the size of a decode
   step's elementwise work) captured in one CUDA graph and replayed: microseconds per kernel. This is
   what a kernel that no operator table measures costs between the measured ones inside a graph.
2. eager ops: the same N ops launched one by one from Python (no graph): microseconds per op, the
   CPU's dispatch + launch rate when nothing else hides it.
3. decoder step: a decoder of L layers written as plain PyTorch modules (RMSNorm, fused QKV, rotary,
   SDPA over a static KV cache, o_proj, fused gate_up, SiLU x mul, down, residuals), one token at
   batch 1, dims of Qwen3-8B: eager step time, CUDA-graph replay time, and the kernels one step
   launches (counted with torch.profiler). From these: the eager cost per kernel when launches are
   the bound (eager / kernels), and whether eager time is max(GPU, launches) or GPU + launches.

Exit 0 also without a GPU (one line says so). --smoke: tiny sizes, one repeat.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time


def _median_time(fn, repeats: int, sync) -> float:
    out = []
    for _ in range(repeats):
        sync()
        t0 = time.perf_counter()
        fn()
        sync()
        out.append(time.perf_counter() - t0)
    return statistics.median(out)


def _graph_time(torch, fn, repeats: int) -> float:
    """Median replay time of ``fn`` captured in a CUDA graph (warmed up on a side stream first, as
    torch.cuda.graphs asks)."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    for _ in range(3):
        g.replay()
    return _median_time(g.replay, repeats, torch.cuda.synchronize)


def graph_and_eager_ops(torch, n: int, hidden: int, repeats: int) -> dict:
    dev = torch.device("cuda")
    x = torch.zeros(1, hidden, dtype=torch.bfloat16, device=dev)
    sync = torch.cuda.synchronize

    def chain():
        for _ in range(n):
            x.add_(1.0)

    for _ in range(3):
        chain()
    eager = _median_time(chain, repeats, sync)
    graph = _graph_time(torch, chain, repeats)
    return {"kernels": n, "hidden": hidden, "graph_us_per_kernel": graph / n * 1e6,
            "eager_us_per_op": eager / n * 1e6}


def decoder(torch, layers: int, hidden: int, heads: int, kv_heads: int, head_dim: int, inter: int,
            context: int, repeats: int) -> dict:
    nn, F = torch.nn, torch.nn.functional
    dev, dt = torch.device("cuda"), torch.bfloat16

    class RMSNorm(nn.Module):
        def __init__(self, d):
            super().__init__()
            self.w = nn.Parameter(torch.ones(d, dtype=dt, device=dev))

        def forward(self, x):
            v = x.float().pow(2).mean(-1, keepdim=True)
            return (x.float() * torch.rsqrt(v + 1e-6)).to(dt) * self.w

    class Layer(nn.Module):
        def __init__(self):
            super().__init__()
            self.n1, self.n2 = RMSNorm(hidden), RMSNorm(hidden)
            self.qkv = nn.Linear(hidden, (heads + 2 * kv_heads) * head_dim, bias=False, device=dev, dtype=dt)
            self.o = nn.Linear(heads * head_dim, hidden, bias=False, device=dev, dtype=dt)
            self.gu = nn.Linear(hidden, 2 * inter, bias=False, device=dev, dtype=dt)
            self.down = nn.Linear(inter, hidden, bias=False, device=dev, dtype=dt)
            self.k_cache = torch.randn(1, kv_heads, context, head_dim, device=dev, dtype=dt)
            self.v_cache = torch.randn(1, kv_heads, context, head_dim, device=dev, dtype=dt)

        def forward(self, x, cos, sin, pos):
            h = self.n1(x)
            q, k, v = self.qkv(h).split([heads * head_dim, kv_heads * head_dim, kv_heads * head_dim], -1)
            q = q.view(1, 1, heads, head_dim).transpose(1, 2)
            k = k.view(1, 1, kv_heads, head_dim).transpose(1, 2)
            v = v.view(1, 1, kv_heads, head_dim).transpose(1, 2)
            q1, q2 = q.chunk(2, -1)
            k1, k2 = k.chunk(2, -1)
            q = torch.cat((q1 * cos - q2 * sin, q2 * cos + q1 * sin), -1)
            k = torch.cat((k1 * cos - k2 * sin, k2 * cos + k1 * sin), -1)
            self.k_cache.index_copy_(2, pos, k)
            self.v_cache.index_copy_(2, pos, v)
            a = F.scaled_dot_product_attention(q, self.k_cache, self.v_cache, enable_gqa=True)
            x = x + self.o(a.transpose(1, 2).reshape(1, heads * head_dim))
            g, u = self.gu(self.n2(x)).chunk(2, -1)
            return x + self.down(F.silu(g) * u)

    model = nn.ModuleList(Layer() for _ in range(layers))
    x = torch.randn(1, hidden, device=dev, dtype=dt)
    cos = torch.randn(1, 1, 1, head_dim // 2, device=dev, dtype=dt)
    sin = torch.randn(1, 1, 1, head_dim // 2, device=dev, dtype=dt)
    pos = torch.tensor([context - 1], device=dev)
    sync = torch.cuda.synchronize

    @torch.inference_mode()
    def step():
        h = x
        for layer in model:
            h = layer(h, cos, sin, pos)
        return h

    for _ in range(3):
        step()
    eager = _median_time(step, repeats, sync)
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        step()
        sync()
    # the kernels the step ran: the profiler's device-side events (CUPTI), each with its GPU time in us
    kernels = [e for e in prof.events() if getattr(getattr(e, "device_type", None), "name", "") == "CUDA"]
    gpu_busy = sum(float(getattr(e, "device_time", None) or getattr(e, "cuda_time", 0.0)) for e in kernels) * 1e-6
    with torch.inference_mode():
        graph = _graph_time(torch, step, repeats)
    n = len(kernels)
    return {"layers": layers, "hidden": hidden, "heads": heads, "kv_heads": kv_heads, "head_dim": head_dim,
            "intermediate": inter, "context": context, "kernels_per_step": n,
            "eager_step_us": eager * 1e6, "graph_step_us": graph * 1e6, "gpu_busy_us": gpu_busy * 1e6,
            "eager_us_per_kernel": eager / n * 1e6 if n else None,
            "graph_gap_us_per_kernel": (graph - gpu_busy) / n * 1e6 if n else None,
            "eager_minus_graph_us_per_kernel": (eager - graph) / n * 1e6 if n else None}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json", default=None, help="write the results here")
    p.add_argument("--repeats", type=int, default=50)
    p.add_argument("--smoke", action="store_true", help="tiny sizes, one repeat (exits 0 without a GPU)")
    args = p.parse_args(argv)
    try:
        import torch
    except ImportError:
        print("No GPU measurement: torch is not installed; nothing measured.")
        return 0
    if not torch.cuda.is_available():
        print("No GPU measurement: no CUDA device; nothing measured.")
        return 0
    reps = 1 if args.smoke else args.repeats
    doc: dict = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__,
                 "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    sizes = [(200, 4096)] if args.smoke else [(2000, 4096), (2000, 8192)]
    doc["ops"] = [graph_and_eager_ops(torch, n, h, reps) for n, h in sizes]
    dims = dict(hidden=4096, heads=32, kv_heads=8, head_dim=128, inter=12288)
    runs = [(2, 256)] if args.smoke else [(4, 1024), (8, 1024), (8, 8192)]
    doc["decoder"] = [decoder(torch, layers, context=ctx, repeats=reps, **dims) for layers, ctx in runs]
    if not args.smoke:
        # GPU-bound layers (6.4 GB of bf16 weights each, ~1.5 ms at H200's bandwidth, more than the ~1 ms its
        # launches take eagerly): does eager time become max(GPU, launches), or GPU + launches?
        big = dict(hidden=16384, heads=128, kv_heads=8, head_dim=128, inter=53248)
        doc["decoder"].append(decoder(torch, 4, context=1024, repeats=max(5, reps // 5), **big))
    for r in doc["ops"]:
        print(f"graph {r['graph_us_per_kernel']:.2f} us/kernel, eager {r['eager_us_per_op']:.2f} us/op "
              f"(N={r['kernels']}, 1x{r['hidden']} bf16 add_)")
    for r in doc["decoder"]:
        print(f"decoder {r['layers']} layers ctx {r['context']}: {r['kernels_per_step']} kernels, eager "
              f"{r['eager_step_us']:.0f} us ({r['eager_us_per_kernel']:.2f}/kernel), "
              f"graph {r['graph_step_us']:.0f} us, "
              f"GPU busy {r['gpu_busy_us']:.0f} us, graph gap {r['graph_gap_us_per_kernel']:.2f} us/kernel, "
              f"hidden {r['hidden']}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(doc, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
