"""Launch candidates per (M, K, N) for the weight-only kernels (pure; the runner times each and
keeps the fastest, a small autotune).

Rules of thumb from ../shared/research/triton-kernels.md: get bytes in flight from more
programs (split-K to ~4-16 programs per SM) rather than bigger tiles; GEMM tiles with BM >= 64
issue wgmma on Hopper; BK = 64 at 128x128 tiles (BK = 128 spills). GEMV tiles use BK = 128: the
v3 NVFP4 GEMV keeps per-block fp32 partials, not decoded tiles, so 64-128 weight elements per
thread compile without spills, and BK = 128 lets each thread hold whole 16-blocks with their
activations in registers (benchmarks/kernel_sass.py; kernels/NOTES.md, v3). The v1 limit of 32
elements per thread came from the byte decode.
"""

from __future__ import annotations

from dataclasses import dataclass, field

GEMV_MAX_M = 8          # one activation row per program: beyond this the weight re-reads dominate
GEMV_MAX_ELEMS_PER_THREAD = 256   # the largest GEMV tile per thread checked spill-free (kernel_sass.py)


@dataclass(frozen=True)
class Candidate:
    path: str                                   # gemv | gemm
    params: dict = field(default_factory=dict)  # kernels.weight_only GemvConfig / GemmConfig fields

    @property
    def text(self) -> str:
        p = self.params
        if self.path == "gemv":
            tile = f"{p['block_n']}x{p['block_k']}"
        else:
            tile = f"{p['block_m']}x{p['block_n']}x{p['block_k']}" + (" swapAB" if p.get("swap_ab") else "")
        return f"{self.path} {tile} sk{p['split_k']} w{p['num_warps']}"


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def split_k_for(tiles: int, k: int, block_k: int, sm_count: int, per_sm: int) -> int:
    """Split K until about `per_sm` programs per SM run, keeping >= 2 K blocks per split."""
    k_blocks = _cdiv(k, block_k)
    want = _cdiv(sm_count * per_sm, max(tiles, 1))
    return max(1, min(want, k_blocks // 2 or 1))


def candidates(m: int, k: int, n: int, sm_count: int, group: int = 128) -> tuple[Candidate, ...]:
    """Candidates for C[M, N] = A[M, K] @ W[N, K]^T; every BK divides or is divided by `group`."""
    out: list[Candidate] = []
    if m <= GEMV_MAX_M:
        # 256x128 (v4): 256 weights per thread halve the activation reads per weight; no spills
        # on sm_90a/100a/120a for any format (kernels/NOTES.md v4)
        # 32x256 w2 and 64x256 w4: the fastest 4-bit GEMVs of an H200 sweep (kernels/NOTES.md, "v4 on an
        # H200": NVFP4 2.9 TB/s at 16384x53248 against 2.1 for 64x128 w4; a 256-wide K tile, more in flight)
        for bn, bk, warps, per_sm in ((64, 128, 4, 8), (32, 128, 4, 8), (128, 128, 4, 4), (64, 128, 4, 24),
                                      (256, 128, 4, 2), (32, 256, 2, 16), (64, 256, 4, 16)):
            tiles = _cdiv(n, bn) * m
            sk = split_k_for(tiles, k, bk, sm_count, per_sm)
            # f16_block_sums: the v5 NVFP4 and INT4 block dots (packed fp16 block sums; sm_90a, 256x128:
            # NVFP4 3.92 -> 2.74, INT4 5.54 -> 2.89 SASS per weight; kernels/NOTES.md v5); FP8 ignores it
            out.append(Candidate("gemv", dict(block_n=bn, block_k=bk, split_k=sk, num_warps=warps, num_stages=2,
                                              f16_block_sums=True)))
    if m <= 64:
        bm = 16 if m <= 16 else (32 if m <= 32 else 64)
        tiles = _cdiv(m, bm) * _cdiv(n, 64)
        sk = split_k_for(tiles, k, 128, sm_count, 4)
        for swap in (False, True):
            out.append(Candidate("gemm", dict(block_m=bm, block_n=64, block_k=128, split_k=sk, group_m=8,
                                              swap_ab=swap, num_warps=4, num_stages=3)))
        if bm == 16:
            # 2 warps (mma.sync also on Hopper): the fewest SASS per weight element for M <= 16 in
            # the benchmarks/kernel_sass.py tile sweep (kernels/NOTES.md, v3)
            out.append(Candidate("gemm", dict(block_m=16, block_n=64, block_k=128, split_k=sk, group_m=8,
                                              swap_ab=True, num_warps=2, num_stages=3)))
    else:
        for bm, bn, bk, warps, stages, swap in ((128, 128, 64, 8, 3, False), (128, 128, 64, 8, 3, True),
                                                (64, 128, 64, 8, 3, False)):
            tiles = _cdiv(m, bm) * _cdiv(n, bn)
            sk = split_k_for(tiles, k, bk, sm_count, 1) if tiles < sm_count else 1
            out.append(Candidate("gemm", dict(block_m=bm, block_n=bn, block_k=bk, split_k=sk, group_m=8,
                                              swap_ab=swap, num_warps=warps, num_stages=stages)))
    return tuple(c for c in out if _fits_group(c, group))


def _fits_group(c: Candidate, group: int) -> bool:
    bk = c.params["block_k"]
    return bk % group == 0 or group % bk == 0


def arch_limits(cc: tuple[int, int]) -> tuple[str, str | None]:
    """(activation dtype, reason every Triton kernel is skipped or None) for a compute capability.

    Triton generates tensor-core code for sm_75 and newer; BF16 MMA needs sm_80 (Turing runs the
    FP16 paths, as the engines do there)."""
    if cc < (7, 5):
        return "fp16", f"Triton kernels need compute capability >= 7.5 (this GPU is {cc[0]}.{cc[1]})"
    return ("bf16" if cc >= (8, 0) else "fp16"), None
