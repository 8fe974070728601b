"""Weight-only (W4A16 NVFP4, W8A16 FP8, W4A16 INT4) GEMV and GEMM kernels: C = A @ W^T.

Tensor-layout contract (host side; all tensors contiguous, same device):

  a   [M, K]   fp16 | bf16 (fp32 accepted: CPU interpreter tests)   activations
  W   [N, K]   one of the formats of kernels.decode (Weight below holds its tensors):
        nvfp4: wq uint8 [N, K//2], ws float8_e4m3fn [N, K//16], gs float32 [1]  W = e2m1*ws*gs
               (K % 16 == 0)
        fp8:   wq float8_e4m3fn [N, K], ws float32 [N]                         W = e4m3*ws[n]
               (K % 4 == 0)
        int4:  wq uint8 [N, K//2], ws float16 [N, K//group]                    W = (q-8)*ws
               (K % group == 0, K % 8 == 0)
        The launchers pass wq to the kernels as int32 words (a view, no copy).
  c   [M, N]   a's dtype when SPLIT_K == 1; float32 (zero-filled, fp32 atomics) when SPLIT_K > 1

Two launch shapes, same decode:
  gemv  split-K GEMV for decode (M of a few rows): one activation row per program (grid axis 0,
        so the programs sharing a weight tile run together and re-read it from L2), fp32 FMA,
        K split over grid axis 2. No tensor cores. NVFP4 keeps fp32 partials per (row, 16-block)
        in registers across the K loop, multiplies the block scale into each 16-product sum and
        reduces once after the loop (kernels.decode.nvfp4_gemv_step); FP8/INT4 reduce each tile.
        F16X2_ASM (set by `gemv` on GPUs) widens fp16 pairs with one inline-PTX cvt block; the
        interpreter runs the same math in plain Triton (kernels.decode.f16x2_to_f32).
        EVEN (set by `gemv` when every tile lies inside W) drops the masks; for NVFP4 it also
        selects the v4 step: one PTX block per 16-block (decode, widen, two FMA chains) and E4M3
        scales read as words, with F32X2 (sm_100+) pairing the FMAs as FFMA2 (kernels/NOTES.md v4).
        H2 (`GemvConfig.f16_block_sums`, sm_80+; the microbench's candidates set it) replaces that block
        dot by v5's: products and 16-term sums in packed fp16 (HFMA2) on activations scaled per
        16-block by a power of two, widened to fp32 once per block; not exact (kernels/NOTES.md v5).
        INT4 gets the same on EVEN tiles (int4_gemv_step_h2): its group scale then multiplies each
        16-block sum in fp32, not each weight in fp16 (the tile contract of kernels.decode).
  gemm  tiled tl.dot (BF16/FP16 MMA, fp32 accumulate) for prefill, optional split-K for small M;
        SWAP_AB computes (W @ A^T)^T so the weight fills the MMA M dimension when M is small.
        With bf16 activations on a GPU, NVFP4 decodes straight to bf16 (W_BF16, set by `gemm`);
        fp16 activations and the interpreter (bf16 dots run in fp32 there) use the fp16 decode.
Each program of split index s (grid axis) walks the contiguous K range [s*K_ITERS*BK, (s+1)*K_ITERS*BK);
the split count is a launch parameter, not a constexpr (one compile serves every split; ATOMIC
says whether partial sums are added with fp32 atomics).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import torch
import triton
import triton.language as tl

from kernels.decode import (FP8, INT4, NVFP4, epilogue_factor, int4_gemv_step_h2, nvfp4_gemv_step,
                            nvfp4_gemv_step_even, nvfp4_gemv_step_h2, weight_tile)

FORMATS = {"nvfp4": NVFP4, "fp8": FP8, "int4": INT4}
INTERPRET = os.environ.get("TRITON_INTERPRET", "0") == "1"


@triton.jit
def weight_only_gemv_kernel(
    a_ptr, wq_ptr, ws_ptr, gs_ptr, c_ptr,
    N, K, K_ITERS,
    stride_am, stride_wn, stride_sn, stride_cm,
    FORMAT: tl.constexpr, GROUP: tl.constexpr,
    BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, ATOMIC: tl.constexpr,
    F16X2_ASM: tl.constexpr = False, EVEN: tl.constexpr = False, F32X2: tl.constexpr = False,
    H2: tl.constexpr = False,
):
    tl.static_assert(BLOCK_K % 32 == 0)
    m = tl.program_id(0)
    pid_n = tl.program_id(1)
    pid_k = tl.program_id(2)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    mask_n = offs_n < N
    # the last split may own fewer K blocks: it stops there, so no iteration reads past K
    iters = tl.minimum(K_ITERS, tl.cdiv(K, BLOCK_K) - pid_k * K_ITERS)
    if FORMAT == 0:
        # Per-thread block partials across the whole K range, one reduction after the loop.
        acc2 = tl.zeros((BLOCK_N, BLOCK_K // 16), dtype=tl.float32)
        for it in range(0, iters):
            k0 = (pid_k * K_ITERS + it) * BLOCK_K
            offs_k = k0 + tl.arange(0, BLOCK_K)
            if EVEN:
                a = tl.load(a_ptr + m * stride_am + offs_k).to(tl.float32)
                if H2:
                    acc2 = nvfp4_gemv_step_h2(acc2, wq_ptr, ws_ptr, a, offs_n, k0, stride_wn, stride_sn,
                                              BLOCK_N, BLOCK_K, F16X2_ASM)
                else:
                    acc2 = nvfp4_gemv_step_even(acc2, wq_ptr, ws_ptr, a, offs_n, k0, stride_wn, stride_sn,
                                                BLOCK_N, BLOCK_K, F16X2_ASM, F32X2)
            else:
                a = tl.load(a_ptr + m * stride_am + offs_k, mask=offs_k < K, other=0.0).to(tl.float32)
                acc2 = nvfp4_gemv_step(acc2, wq_ptr, ws_ptr, a, offs_n, mask_n, k0, K, stride_wn, stride_sn,
                                       BLOCK_N, BLOCK_K, F16X2_ASM)
        acc = tl.sum(acc2, axis=1) * 256.0            # the E4M3 scales were decoded as e4m3 * 2**-8
    elif FORMAT == 2 and H2 and EVEN:
        # v5 INT4: fp16x2 block sums, the group scale per 16-block partial, one reduction after the loop
        acc2 = tl.zeros((BLOCK_N, BLOCK_K // 16), dtype=tl.float32)
        for it in range(0, iters):
            k0 = (pid_k * K_ITERS + it) * BLOCK_K
            a = tl.load(a_ptr + m * stride_am + k0 + tl.arange(0, BLOCK_K)).to(tl.float32)
            acc2 = int4_gemv_step_h2(acc2, wq_ptr, ws_ptr, a, offs_n, k0, stride_wn, stride_sn,
                                     BLOCK_N, BLOCK_K, GROUP, F16X2_ASM)
        acc = tl.sum(acc2, axis=1)
    else:
        acc = tl.zeros((BLOCK_N,), dtype=tl.float32)
        for it in range(0, iters):
            k0 = (pid_k * K_ITERS + it) * BLOCK_K
            offs_k = k0 + tl.arange(0, BLOCK_K)
            if EVEN:
                a = tl.load(a_ptr + m * stride_am + offs_k).to(tl.float32)
                w = weight_tile(wq_ptr, ws_ptr, offs_n, mask_n, k0, K, stride_wn, stride_sn,
                                FORMAT, BLOCK_N, BLOCK_K, GROUP, EVEN=True)
            else:
                a = tl.load(a_ptr + m * stride_am + offs_k, mask=offs_k < K, other=0.0).to(tl.float32)
                w = weight_tile(wq_ptr, ws_ptr, offs_n, mask_n, k0, K, stride_wn, stride_sn,
                                FORMAT, BLOCK_N, BLOCK_K, GROUP)
            acc += tl.sum(w.to(tl.float32) * a[None, :], axis=1)
    acc = acc * epilogue_factor(gs_ptr, ws_ptr, offs_n, mask_n, FORMAT)
    c_ptrs = c_ptr + m * stride_cm + offs_n
    if not ATOMIC:
        tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=mask_n)
    else:
        tl.atomic_add(c_ptrs, acc, mask=mask_n)


@triton.jit
def weight_only_gemm_kernel(
    a_ptr, wq_ptr, ws_ptr, gs_ptr, c_ptr,
    M, N, K, K_ITERS,
    stride_am, stride_wn, stride_sn, stride_cm,
    FORMAT: tl.constexpr, GROUP: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    ATOMIC: tl.constexpr, GROUP_M: tl.constexpr, SWAP_AB: tl.constexpr,
    DOT_DTYPE: tl.constexpr, W_BF16: tl.constexpr = False,
):
    tl.static_assert(BLOCK_K % 32 == 0)
    tl.static_assert(BLOCK_M >= 16)
    pid = tl.program_id(0)
    pid_k = tl.program_id(1)
    # Grouped tile order: GROUP_M row-tiles share weight tiles while they are in L2.
    grid_m = tl.cdiv(M, BLOCK_M)
    grid_n = tl.cdiv(N, BLOCK_N)
    width = GROUP_M * grid_n
    first_m = (pid // width) * GROUP_M
    rows = tl.minimum(grid_m - first_m, GROUP_M)
    pid_m = first_m + (pid % width) % rows
    pid_n = (pid % width) // rows
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    mask_m = offs_m < M
    mask_n = offs_n < N
    if SWAP_AB:
        acc = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
    else:
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for it in range(0, K_ITERS):
        k0 = (pid_k * K_ITERS + it) * BLOCK_K
        offs_k = k0 + tl.arange(0, BLOCK_K)
        a = tl.load(a_ptr + offs_m[:, None] * stride_am + offs_k[None, :],
                    mask=mask_m[:, None] & (offs_k < K)[None, :], other=0.0).to(DOT_DTYPE)
        w = weight_tile(wq_ptr, ws_ptr, offs_n, mask_n, k0, K, stride_wn, stride_sn,
                        FORMAT, BLOCK_N, BLOCK_K, GROUP, W_BF16).to(DOT_DTYPE)
        if SWAP_AB:
            acc += tl.dot(w, tl.trans(a), out_dtype=tl.float32)
        else:
            acc += tl.dot(a, tl.trans(w), out_dtype=tl.float32)
    if SWAP_AB:
        acc = tl.trans(acc)
    acc = acc * epilogue_factor(gs_ptr, ws_ptr, offs_n, mask_n, FORMAT, W_BF16)[None, :]
    c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :]
    mask = mask_m[:, None] & mask_n[None, :]
    if not ATOMIC:
        tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=mask)
    else:
        tl.atomic_add(c_ptrs, acc, mask=mask)


@triton.jit
def dequantize_kernel(
    wq_ptr, ws_ptr, gs_ptr, out_ptr, N, K,
    stride_wn, stride_sn, stride_on,
    FORMAT: tl.constexpr, GROUP: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):
    """W[N, K] in fp32 (or out's dtype): the exact decoded weight, for tests and dequant-to-memory."""
    offs_n = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    k0 = tl.program_id(1) * BLOCK_K
    offs_k = k0 + tl.arange(0, BLOCK_K)
    mask_n = offs_n < N
    w = weight_tile(wq_ptr, ws_ptr, offs_n, mask_n, k0, K, stride_wn, stride_sn,
                    FORMAT, BLOCK_N, BLOCK_K, GROUP).to(tl.float32)
    w = w * epilogue_factor(gs_ptr, ws_ptr, offs_n, mask_n, FORMAT)[:, None]
    tl.store(out_ptr + offs_n[:, None] * stride_on + offs_k[None, :], w.to(out_ptr.dtype.element_ty),
             mask=mask_n[:, None] & (offs_k < K)[None, :])


# ----------------------------------------------------------------------------- host side
@dataclass(frozen=True)
class Weight:
    """One quantized weight in the layout contract above; `n`, `k` are the logical W[N, K] sizes."""

    fmt: str                      # nvfp4 | fp8 | int4
    wq: Any                       # torch.Tensor
    ws: Any
    gs: Any | None = None         # nvfp4 only
    group: int = 16

    @property
    def n(self) -> int:
        return self.wq.shape[0]

    @property
    def k(self) -> int:
        return self.wq.shape[1] * (1 if self.fmt == "fp8" else 2)

    def nbytes(self) -> int:
        """Bytes a kernel must read for the whole weight (packed values + scales)."""
        t = [self.wq, self.ws] + ([self.gs] if self.gs is not None else [])
        return sum(x.numel() * x.element_size() for x in t)


@dataclass(frozen=True)
class GemvConfig:
    block_n: int = 64
    block_k: int = 64
    split_k: int = 1
    num_warps: int = 4
    num_stages: int = 2
    # NVFP4 and INT4, tiles inside W: 16-block sums in packed fp16 (v5, kernels.decode.*_gemv_step_h2;
    # not exact: error bound in kernels/NOTES.md v5). Ignored by FP8 and by masked tiles.
    f16_block_sums: bool = False


@dataclass(frozen=True)
class GemmConfig:
    block_m: int = 16
    block_n: int = 64
    block_k: int = 64
    split_k: int = 1
    group_m: int = 8
    swap_ab: bool = False
    num_warps: int = 4
    num_stages: int = 3


def dot_dtype(act_dtype) -> Any:
    # The interpreter holds bf16 as raw uint16: any bf16 arithmetic there is garbage.
    if act_dtype == torch.bfloat16:
        return tl.float32 if INTERPRET else tl.bfloat16
    return {torch.float16: tl.float16, torch.float32: tl.float32}[act_dtype]


def _args(w: Weight):
    """Kernel pointer args: (wq as bytes, ws as the decode reads it, gs placeholder)."""
    wq = w.wq.view(torch.uint8).view(torch.int32)        # the decode reads 32-bit words
    ws = w.ws.view(torch.uint8) if w.fmt == "nvfp4" else w.ws
    gs = w.gs if w.gs is not None else w.ws          # unused by fp8/int4 kernels
    return wq, ws, gs


def _check(a, w: Weight) -> None:
    if a.dim() != 2 or a.shape[1] != w.k:
        raise ValueError(f"activations {tuple(a.shape)} do not match W[{w.n}, {w.k}]")
    if not (a.is_contiguous() and w.wq.is_contiguous() and w.ws.is_contiguous()):
        raise ValueError("all tensors must be contiguous")
    group = {"nvfp4": 16, "int4": w.group}.get(w.fmt, 4)
    if w.k % group or w.k % 8 * (w.fmt != "fp8"):
        raise ValueError(f"K={w.k} must be a multiple of the {w.fmt} group size {group} (and of 8)")


def _output(a, w: Weight, split_k: int, out):
    m = a.shape[0]
    dtype = torch.float32 if split_k > 1 else a.dtype
    if out is None:
        return (torch.zeros if split_k > 1 else torch.empty)((m, w.n), device=a.device, dtype=dtype)
    if out.dtype != dtype or tuple(out.shape) != (m, w.n):
        raise ValueError(f"out must be {dtype} [{m}, {w.n}]")
    if split_k > 1:
        out.zero_()
    return out


def _k_iters(k: int, block_k: int, split_k: int) -> int:
    return triton.cdiv(triton.cdiv(k, block_k), split_k)


def gemv(a, w: Weight, cfg: GemvConfig = GemvConfig(), out=None):
    """C = A @ W^T with the split-K GEMV kernel (any M; meant for M of a few rows)."""
    _check(a, w)
    if w.fmt == "int4" and not (cfg.block_k % w.group == 0 or w.group % cfg.block_k == 0):
        raise ValueError("block_k and the int4 group must divide one another")
    c = _output(a, w, cfg.split_k, out)
    wq, ws, gs = _args(w)
    grid = (a.shape[0], triton.cdiv(w.n, cfg.block_n), cfg.split_k)
    weight_only_gemv_kernel[grid](
        a, wq, ws, gs, c, w.n, w.k, _k_iters(w.k, cfg.block_k, cfg.split_k),
        a.stride(0), wq.stride(0), ws.stride(0) if ws.dim() > 1 else 0, c.stride(0),
        FORMAT=FORMATS[w.fmt], GROUP=w.group, BLOCK_N=cfg.block_n, BLOCK_K=cfg.block_k,
        ATOMIC=cfg.split_k > 1, F16X2_ASM=not INTERPRET, EVEN=gemv_even(w, cfg.block_n, cfg.block_k, ws),
        F32X2=not INTERPRET and a.is_cuda and torch.cuda.get_device_capability(a.device) >= (10, 0),
        H2=gemv_h2(w, cfg, torch.cuda.get_device_capability(a.device) if a.is_cuda and not INTERPRET else None),
        num_warps=cfg.num_warps, num_stages=cfg.num_stages)
    return c


def gemv_h2(w: Weight, cfg: GemvConfig, cc: tuple[int, int] | None) -> bool:
    """Whether the GEMV runs v5's fp16x2 block sums (kernels.decode.nvfp4_gemv_step_h2 and
    int4_gemv_step_h2): asked for by `cfg.f16_block_sums`, NVFP4 or INT4 with groups of 16s, on
    sm_80+ (its `cvt.rn.f16x2.f32` pack) or the interpreter (cc None). It applies to EVEN tiles
    only; masked ones keep the v4 steps."""
    fmt_ok = w.fmt == "nvfp4" or (w.fmt == "int4" and w.group % 16 == 0)
    return cfg.f16_block_sums and fmt_ok and (cc is None or cc >= (8, 0))


def gemv_even(w: Weight, block_n: int, block_k: int, ws=None) -> bool:
    """Whether every GEMV tile lies inside W, so the kernel drops its masks. NVFP4 also reads its
    E4M3 scales as 4-byte words (kernels.decode.nvfp4_gemv_step_even): whole words per tile and
    per row, on an aligned base."""
    even = w.n % block_n == 0 and w.k % block_k == 0
    if w.fmt == "nvfp4":
        even = even and block_k % 64 == 0 and (ws is None or ws.data_ptr() % 4 == 0)
    return even


def gemm(a, w: Weight, cfg: GemmConfig = GemmConfig(), out=None):
    """C = A @ W^T with the tiled tl.dot kernel (16-bit MMA, fp32 accumulate)."""
    _check(a, w)
    if w.fmt == "int4" and not (cfg.block_k % w.group == 0 or w.group % cfg.block_k == 0):
        raise ValueError("block_k and the int4 group must divide one another")
    c = _output(a, w, cfg.split_k, out)
    wq, ws, gs = _args(w)
    m = a.shape[0]
    grid = (triton.cdiv(m, cfg.block_m) * triton.cdiv(w.n, cfg.block_n), cfg.split_k)
    weight_only_gemm_kernel[grid](
        a, wq, ws, gs, c, m, w.n, w.k, _k_iters(w.k, cfg.block_k, cfg.split_k),
        a.stride(0), wq.stride(0), ws.stride(0) if ws.dim() > 1 else 0, c.stride(0),
        FORMAT=FORMATS[w.fmt], GROUP=w.group, BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n,
        BLOCK_K=cfg.block_k, ATOMIC=cfg.split_k > 1, GROUP_M=cfg.group_m, SWAP_AB=cfg.swap_ab,
        DOT_DTYPE=dot_dtype(a.dtype), W_BF16=w.fmt == "nvfp4" and dot_dtype(a.dtype) == tl.bfloat16,
        num_warps=cfg.num_warps, num_stages=cfg.num_stages)
    return c


def dequantize(w: Weight, dtype=None, block_n: int = 32, block_k: int = 64):
    """The decoded weight W[N, K] (fp32 by default)."""
    wq, ws, gs = _args(w)
    out = torch.empty((w.n, w.k), device=w.wq.device, dtype=dtype or torch.float32)
    grid = (triton.cdiv(w.n, block_n), triton.cdiv(w.k, block_k))
    dequantize_kernel[grid](
        wq, ws, gs, out, w.n, w.k, wq.stride(0), ws.stride(0) if ws.dim() > 1 else 0, out.stride(0),
        FORMAT=FORMATS[w.fmt], GROUP=w.group, BLOCK_N=block_n, BLOCK_K=block_k)
    return out
