"""Random weights in the kernels' layout contract (host side, torch only).

Tensor-layout contract (W[N, K], N = output features, K = input features, contiguous):
  nvfp4  wq uint8 [N, K//2] (two E2M1 codes per byte along K, low nibble = even k),
         ws float8_e4m3fn [N, K//16], gs float32 [1]               W = e2m1 * ws * gs
  fp8    wq float8_e4m3fn [N, K], ws float32 [N]                    W = e4m3 * ws[n]
  int4   wq uint8 [N, K//2] (low nibble = even k), ws float16 [N, K//group]   W = (q - 8) * ws
  bf16   w [N, K] in the activation dtype (the cuBLAS baseline)

Benchmarks never run on zeros: every code, scale and activation is random and (except the E2M1 /
int4 codes, which cover their whole range) non-zero, so no hardware shortcut on zero data can
flatter a result.
"""

from __future__ import annotations

import torch

from kernels.weight_only import Weight


def random_e4m3(shape, lo: int, hi: int, device, generator=None):
    """float8_e4m3fn tensor of random positive codes in [lo, hi] (0x38 = 1.0; never NaN 0x7F)."""
    b = torch.randint(lo, hi + 1, shape, dtype=torch.uint8, device=device, generator=generator)
    return b.view(torch.float8_e4m3fn)


def random_weight(fmt: str, n: int, k: int, device="cpu", generator=None, group: int = 128) -> Weight:
    def rand_bytes(shape, hi=255):
        return torch.randint(0, hi + 1, shape, dtype=torch.uint8, device=device, generator=generator)

    def rand_uniform(shape, lo, hi):
        u = torch.rand(shape, dtype=torch.float32, device=device, generator=generator)
        return lo + (hi - lo) * u

    if fmt == "nvfp4":
        if k % 16:
            raise ValueError("NVFP4 needs K % 16 == 0")
        return Weight("nvfp4", rand_bytes((n, k // 2)),
                      random_e4m3((n, k // 16), 0x20, 0x60, device, generator),   # 2^-3 .. 2^5
                      rand_uniform((1,), 0.002, 0.02), group=16)
    if fmt == "fp8":
        sign = rand_bytes((n, k), 1) << 7
        mag = torch.randint(0x08, 0x70, (n, k), dtype=torch.uint8, device=device, generator=generator)
        return Weight("fp8", (sign | mag).view(torch.float8_e4m3fn), rand_uniform((n,), 0.001, 0.01), group=1)
    if fmt == "int4":
        if k % group:
            raise ValueError(f"INT4 needs K % {group} == 0")
        return Weight("int4", rand_bytes((n, k // 2)),
                      rand_uniform((n, k // group), 0.002, 0.02).to(torch.float16), group=group)
    raise ValueError(f"unknown weight format {fmt!r}")


def random_activations(m: int, k: int, dtype, device="cpu", generator=None):
    """Gaussian activations, never exactly zero-filled."""
    return torch.randn((m, k), dtype=torch.float32, device=device, generator=generator).to(dtype)


_E2M1 = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0)


def reference_dequantize(w: Weight):
    """W[N, K] in float32 with plain torch ops (table lookup, native fp8 cast): an independent
    check of the Triton decode on a GPU."""
    if w.fmt == "fp8":
        return w.wq.to(torch.float32) * w.ws[:, None]
    q = w.wq.to(torch.int64)
    codes = torch.stack([q & 0xF, q >> 4], dim=-1).reshape(w.n, w.k)
    if w.fmt == "nvfp4":
        assert w.gs is not None, "an NVFP4 weight carries its global scale"
        lut = torch.tensor(_E2M1, dtype=torch.float32, device=w.wq.device)
        scale = w.ws.to(torch.float32).repeat_interleave(16, dim=1)
        return lut[codes] * scale * w.gs.to(torch.float32)
    return (codes - 8).to(torch.float32) * w.ws.to(torch.float32).repeat_interleave(w.group, dim=1)
