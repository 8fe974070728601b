"""GPU-only rules checked on CPU: the benchmark's launch candidates compile for real targets
(sm_90a, sm_86, sm_100a) with this Triton, the per-arch tl.dot lowering is detected (Triton 3.x
emits no tensor-core MMA for sm_75), the v4 NVFP4 GEMV pairs its FMAs (FFMA2) only where the
target has them, and the benchmark's NVFP4 and INT4 GEMVs are v5's (packed fp16 block sums, HFMA2)
on sm_80+. Runs in a subprocess: compiling needs TRITON_INTERPRET unset."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = r"""
import json, triton, triton.language as tl
from triton.compiler import ASTSource
from triton.backends.compiler import GPUTarget
from kernels import weight_only as W
from kernels.arch import dot_lowering
from advisor.microbench import configs

def compile_(fn, sig, consts, cfg, cc):
    div = {(fn.arg_names.index(k),): [["tt.divisibility", 16]] for k in sig
           if k.endswith("_ptr") or k.startswith("stride")}
    src = ASTSource(fn=fn, signature={**sig, **{k: "constexpr" for k in consts}}, constexprs=consts, attrs=div)
    return triton.compile(src, target=GPUTarget("cuda", cc, 32),
                          options={"num_warps": cfg["num_warps"], "num_stages": cfg["num_stages"]}).asm["ptx"]

def lowering(ptx):
    return "wgmma" if "wgmma" in ptx else ("mma" if "mma.sync" in ptx else "fma")

out = {"lowering": {str(cc): dot_lowering(cc, "fp16")[0] for cc in [(7, 5), (8, 6), (9, 0)]}, "compiled": []}
ints = ["N", "K", "K_ITERS", "stride_am", "stride_wn", "stride_sn", "stride_cm"]
# v4: the candidate with its f16_block_sums turned off (the exact fp32 block dot)
for fmt, m, cc, v4 in [("nvfp4", 1, 90, False), ("fp8", 1, 90, False), ("int4", 1, 86, False), ("nvfp4", 16, 90, False),
                       ("nvfp4", 8192, 90, False), ("int4", 2048, 86, False), ("nvfp4", 1, 100, False),
                       ("nvfp4", 1, 90, True), ("nvfp4", 1, 100, True)]:
    group = 128 if fmt == "int4" else 16
    c = next(x for x in configs.candidates(m, 5120, 17408, 132, group)
             if (x.path == "gemv") == (m == 1) and not (m == 16 and not x.params.get("swap_ab")))
    p = c.params
    ws = {"nvfp4": "*u8", "fp8": "*fp32", "int4": "*fp16"}[fmt]
    sig = {"a_ptr": "*bf16", "wq_ptr": "*i32", "ws_ptr": ws, "gs_ptr": "*fp32",
           "c_ptr": "*fp32" if p["split_k"] > 1 else "*bf16"}
    consts = {"FORMAT": W.FORMATS[fmt], "GROUP": group, "BLOCK_N": p["block_n"], "BLOCK_K": p["block_k"],
              "ATOMIC": p["split_k"] > 1}
    if c.path == "gemv":
        sig.update({k: "i32" for k in ints}); fn = W.weight_only_gemv_kernel
        # the GPU launch: inline PTX; 5120 x 17408 tiles evenly; FFMA2 from sm_100 on
        h2 = W.gemv_h2(W.Weight(fmt, None, None), W.GemvConfig(**p), divmod(cc, 10)) and not v4
        consts.update(F16X2_ASM=True, EVEN=True, F32X2=cc >= 100, H2=h2)
    else:
        sig.update({k: "i32" for k in ["M"] + ints}); fn = W.weight_only_gemm_kernel
        consts.update(BLOCK_M=p["block_m"], GROUP_M=p["group_m"], SWAP_AB=p["swap_ab"], DOT_DTYPE=tl.bfloat16,
                      W_BF16=fmt == "nvfp4")          # bf16 activations: NVFP4 decodes straight to bf16
    ptx = compile_(fn, sig, consts, p, cc)
    out["compiled"].append([fmt, m, cc, v4, c.text, lowering(ptx), "fma.rn.f32x2" in ptx, "fma.rn.f16x2" in ptx])
print(json.dumps(out))
"""


def test_candidates_compile_for_real_gpus_and_lowering_is_detected():
    pytest.importorskip("triton")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
    env["TRITON_CACHE_DIR"] = env.get("XDG_CACHE_HOME", str(ROOT / ".triton-cache")) + "/triton"
    proc = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, cwd=ROOT,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    assert res["lowering"] == {"(7, 5)": "fma", "(8, 6)": "mma", "(9, 0)": "wgmma"}
    by = {(fmt, m, cc): lowering for fmt, m, cc, v4, _text, lowering, _x2, _h2 in res["compiled"] if not v4}
    paired = {(fmt, m, cc): x2 for fmt, m, cc, v4, _text, _lowering, x2, _h2 in res["compiled"] if v4}
    half = {(fmt, m, cc, v4): h2 for fmt, m, cc, v4, _text, _lowering, _x2, h2 in res["compiled"]}
    assert by[("nvfp4", 1, 90)] == by[("fp8", 1, 90)] == by[("int4", 1, 86)] == by[("nvfp4", 1, 100)] == "fma"
    assert paired[("nvfp4", 1, 100)] and not paired[("nvfp4", 1, 90)]         # FFMA2 exists from sm_100
    assert half[("nvfp4", 1, 90, False)] and half[("nvfp4", 1, 100, False)]   # v5: HFMA2 block sums
    assert half[("int4", 1, 86, False)]                                         # v5 INT4 (sm_80+)
    assert not half[("nvfp4", 1, 90, True)] and not half[("fp8", 1, 90, False)]
    assert by[("nvfp4", 16, 90)] == "wgmma"          # swapped: the weight fills the 64-row MMA side
    assert by[("nvfp4", 8192, 90)] == "wgmma"
    assert by[("int4", 2048, 86)] == "mma"
