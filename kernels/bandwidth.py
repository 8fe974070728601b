"""DRAM bandwidth kernels: the achievable-peak denominator for every other result.

Tensor-layout contract: x, y contiguous 1-D (any dtype; fp16/fp32 used), same numel; out fp32
[programs]. Buffers must be far larger than L2 for the result to mean DRAM bandwidth.

  copy       y[i] = x[i]            bytes moved = 2 * x.nbytes
  read_sum   out[p] = sum of the elements program p streamed; bytes moved = x.nbytes
             (read-only: the access pattern of a weight GEMV)

Grid-stride loops: `programs` programs (default: one per BLOCK, a single pass), each covering
ITERS = cdiv(n, BLOCK * programs) blocks; ITERS is computed on the host so the loop bound does
not depend on program_id.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def copy_kernel(x_ptr, y_ptr, n_elements, ITERS, BLOCK: tl.constexpr):
    for i in range(0, ITERS):
        offs = (i * tl.num_programs(0) + tl.program_id(0)) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n_elements
        tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask), mask=mask)


@triton.jit
def read_sum_kernel(x_ptr, out_ptr, n_elements, ITERS, BLOCK: tl.constexpr):
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for i in range(0, ITERS):
        offs = (i * tl.num_programs(0) + tl.program_id(0)) * BLOCK + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + offs, mask=offs < n_elements, other=0).to(tl.float32)
    tl.store(out_ptr + tl.program_id(0), tl.sum(acc, axis=0))


def _programs(n: int, block: int, programs: int | None) -> int:
    return max(1, min(programs or triton.cdiv(n, block), triton.cdiv(n, block)))


def copy(x, y=None, block: int = 4096, programs: int | None = None, num_warps: int = 8):
    y = torch.empty_like(x) if y is None else y
    n = x.numel()
    p = _programs(n, block, programs)
    copy_kernel[(p,)](x, y, n, triton.cdiv(n, block * p), BLOCK=block, num_warps=num_warps)
    return y


def read_sum(x, out=None, block: int = 4096, programs: int | None = None, num_warps: int = 8):
    """Per-program fp32 partial sums (sum them for the total)."""
    n = x.numel()
    p = _programs(n, block, programs)
    out = torch.empty(p, device=x.device, dtype=torch.float32) if out is None else out[:p]
    read_sum_kernel[(p,)](x, out, n, triton.cdiv(n, block * p), BLOCK=block, num_warps=num_warps)
    return out
