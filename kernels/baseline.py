"""16-bit baseline: C = A @ W^T through torch (cuBLAS on a GPU), what a BF16 checkpoint runs.

Tensor-layout contract: a [M, K] fp16 | bf16, w [N, K] same dtype (nn.Linear weight), c [M, N].
"""

from __future__ import annotations

import torch


def random_weight(n: int, k: int, dtype, device="cpu", generator=None):
    return (torch.randn((n, k), dtype=torch.float32, device=device, generator=generator) * 0.02).to(dtype)


def matmul(a, w, out=None):
    if out is None:
        return torch.nn.functional.linear(a, w)
    return torch.matmul(a, w.t(), out=out)
