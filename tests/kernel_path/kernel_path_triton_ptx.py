"""Compile a tiny tl.dot / tl.dot_scaled kernel for a target and print its PTX (no GPU needed).

Run as a script in a subprocess: TRITON_INTERPRET (which tests/kernels turns on for the session) is
read when triton is imported, and compiling needs it off.
usage: python kernel_path_triton_ptx.py KIND CC [BM]
"""

from __future__ import annotations

import sys


def compile_ptx(kind: str, cc: int, bm: int = 64) -> str:
    import triton
    import triton.language as tl
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    @triton.jit
    def dot(a_ptr, b_ptr, c_ptr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
        rm, rn, rk = tl.arange(0, BM), tl.arange(0, BN), tl.arange(0, BK)
        a = tl.load(a_ptr + rm[:, None] * BK + rk[None, :])
        b = tl.load(b_ptr + rk[:, None] * BN + rn[None, :])
        tl.store(c_ptr + rm[:, None] * BN + rn[None, :], tl.dot(a, b))

    @triton.jit
    def dot_scaled(a_ptr, b_ptr, bs_ptr, c_ptr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
        rm, rn, rk, rk2 = tl.arange(0, BM), tl.arange(0, BN), tl.arange(0, BK), tl.arange(0, BK // 2)
        a = tl.load(a_ptr + rm[:, None] * BK + rk[None, :])
        b = tl.load(b_ptr + rk2[:, None] * BN + rn[None, :])
        bs = tl.load(bs_ptr + rn[:, None] * (BK // 32) + tl.arange(0, BK // 32)[None, :])
        tl.store(c_ptr + rm[:, None] * BN + rn[None, :], tl.dot_scaled(a, None, "bf16", b, bs, "e2m1"))

    if kind == "bf16_x_e2m1":
        sig = {"a_ptr": "*bf16", "b_ptr": "*u8", "bs_ptr": "*u8", "c_ptr": "*fp32"}
        fn = dot_scaled
    else:
        acc = {"i8": "*i32"}.get(kind, "*fp32")
        sig = {"a_ptr": f"*{kind}", "b_ptr": f"*{kind}", "c_ptr": acc}
        fn = dot
    sig.update(BM="constexpr", BN="constexpr", BK="constexpr")
    src = ASTSource(fn, sig, constexprs={"BM": bm, "BN": 64, "BK": 64})
    return triton.compile(src, target=GPUTarget("cuda", cc, 32)).asm["ptx"]


if __name__ == "__main__":
    kind, cc = sys.argv[1], int(sys.argv[2])
    bm = int(sys.argv[3]) if len(sys.argv) > 3 else 64
    sys.stdout.write(compile_ptx(kind, cc, bm))
