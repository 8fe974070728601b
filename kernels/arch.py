"""What Triton itself can do on a compute capability, found by compiling (no GPU needed).

Contract: `dot_lowering(cc, dtype)` compiles a 64x64x32 `tl.dot` for target sm_<cc> and reads
the PTX: "tcgen05" (sm_100 tensor-memory MMA), "wgmma" (Hopper warpgroup MMA), "mma" (mma.sync
tensor cores) or "fma" (CUDA cores:
Triton 3.9 emits no tensor-core MMA for sm_75). Must run in a process without TRITON_INTERPRET
(interpreted kernels cannot be compiled); returns "unknown" with the reason when compiling fails.
"""

from __future__ import annotations

from functools import lru_cache

import triton
import triton.language as tl


@triton.jit
def _probe_dot(a_ptr, b_ptr, c_ptr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    om = tl.arange(0, BM)
    on = tl.arange(0, BN)
    ok = tl.arange(0, BK)
    a = tl.load(a_ptr + om[:, None] * BK + ok[None, :])
    b = tl.load(b_ptr + ok[:, None] * BN + on[None, :])
    tl.store(c_ptr + om[:, None] * BN + on[None, :], tl.dot(a, b))


@lru_cache(maxsize=None)
def dot_lowering(cc: tuple[int, int], dtype: str = "fp16") -> tuple[str, str]:
    """(lowering, detail) of a 16-bit tl.dot on sm_<cc> with this Triton."""
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    sig = {"a_ptr": f"*{dtype}", "b_ptr": f"*{dtype}", "c_ptr": "*fp32", "BM": "constexpr", "BN": "constexpr",
           "BK": "constexpr"}
    try:
        src = ASTSource(fn=_probe_dot, signature=sig, constexprs={"BM": 64, "BN": 64, "BK": 32})
        ptx = triton.compile(src, target=GPUTarget("cuda", cc[0] * 10 + cc[1], 32),
                             options={"num_warps": 4}).asm["ptx"]
    except Exception as exc:  # noqa: BLE001 - an unsupported arch is an answer, not a crash
        return "unknown", f"{type(exc).__name__}: {str(exc).strip().splitlines()[0][:160] if str(exc).strip() else ''}"
    if "tcgen05.mma" in ptx:
        return "tcgen05", f"triton {triton.__version__} lowers tl.dot to tcgen05.mma"
    if "wgmma" in ptx:
        return "wgmma", f"triton {triton.__version__} lowers tl.dot to wgmma"
    if "mma.sync" in ptx:
        return "mma", f"triton {triton.__version__} lowers tl.dot to mma.sync"
    return "fma", (f"triton {triton.__version__} emits no tensor-core MMA for sm_{cc[0]}{cc[1]} "
                   "(tl.dot runs on CUDA cores)")
