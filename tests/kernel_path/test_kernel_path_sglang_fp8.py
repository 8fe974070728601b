"""SGLang 0.5.23's FP8 paths as its code runs (issue 26 points 1, 3 and 5).

1. FP8 experts have no Marlin path: Fp8MoEMethod takes the Triton fused MoE with FP8 operands, which Triton
   refuses to compile below sm_89 (checked here: Triton 3.9 compiles offline for a cuda:NN target).
3. initialize_fp8_gemm_config() turns --fp8-gemm-backend auto into CUTLASS on sm_12x and Triton on sm_11x
   before DeepGEMM or FlashInfer are considered.
5. ModelOpt FP8 dense layers with a static input scale run FlashInfer's bmm_fp8 on sm_90 / sm_10x / sm_12x.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from advisor.kernel_path.explain import explain
from advisor.kernel_path.options import InstallOptions

from kernel_path_builders import checkpoint, gpu

HERE = Path(__file__).resolve().parent
D = InstallOptions()
NO_DG = InstallOptions(deepgemm=False)
NO_FI = InstallOptions(flashinfer=False)


def _decision(preset, gid, layer_class, options=D, moe=False):
    exp = explain(checkpoint(preset, moe=moe), gpu(gid), engine="sglang", options=options)
    return next(d for d in exp.decisions if d.layer_class == layer_class
                and (d.checkpoint_scheme != "BF16" or preset == "bf16"))


def _triton_compile_error(kind: str, cc: int) -> str:
    """Compile a tiny tl.dot kernel with KIND operands for cuda:CC in a subprocess (the interpreter off);
    return Triton's last error line, or '' when it compiles."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    proc = subprocess.run([sys.executable, str(HERE / "kernel_path_triton_ptx.py"), kind, str(cc)],
                          capture_output=True, text=True, env=env, timeout=300)
    return "" if proc.returncode == 0 else proc.stderr.strip().splitlines()[-1]


# ---------------------------------------------------------------- point 1: FP8 MoE below sm_89

@pytest.mark.parametrize("gid", ["a100", "rtx-3090"])
@pytest.mark.parametrize("preset", ["fp8-dynamic", "fp8-block", "fp8-ct-dynamic"])
def test_fp8_moe_does_not_run_on_ampere(gid, preset):
    d = _decision(preset, gid, "moe_experts", moe=True)
    assert d.kernel == "triton fused_moe (FP8)" and not d.runs
    assert "fp8e4nv not supported in this architecture" in d.error
    assert "Marlin MoE" not in " ".join(r.kernel for r in d.rejected)   # SGLang has no FP8 Marlin MoE
    crash = next(w for w in d.warnings if w.text == d.error)
    assert "vLLM" in crash.meaning and "NVFP4" in crash.meaning       # the remedy
    assert "triton/backends/nvidia/compiler.py" in crash.source


@pytest.mark.parametrize("gid", ["rtx-4090", "h100", "b200", "rtx-5090"])
def test_fp8_moe_runs_triton_from_sm89(gid):
    d = _decision("fp8-dynamic", gid, "moe_experts", moe=True)
    assert d.runs and d.kernel == "triton fused_moe (FP8)" and d.activation_dtype == "fp8_e4m3"


def test_requested_marlin_has_no_fp8_moe_kernel():
    opts = InstallOptions(flags=(("moe_runner_backend", "marlin"),))
    d = _decision("fp8-dynamic", "a100", "moe_experts", opts, moe=True)
    assert not d.runs and d.kernel is None


def test_triton_refuses_fp8e4nv_below_sm89_with_the_quoted_message():
    """The crash text quotes what Triton 3.9 really says when it compiles an FP8 dot for cuda:86."""
    err86 = _triton_compile_error("fp8e4nv", 86)
    assert "fp8e4nv not supported in this architecture" in err86, err86
    assert _triton_compile_error("fp8e4nv", 89) == ""
    d = _decision("fp8-dynamic", "rtx-3090", "moe_experts", moe=True)
    quoted = err86[err86.index("ValueError("):]
    assert quoted in d.error, (quoted, d.error)


# ---------------------------------------------------------------- point 3: block-FP8 dense on sm_11x / sm_12x

@pytest.mark.parametrize("gid", ["rtx-5090", "gb10"])
@pytest.mark.parametrize("options", [D, NO_DG, NO_FI])
def test_block_fp8_dense_is_cutlass_on_sm12x(gid, options):
    d = _decision("fp8-block", gid, "dense_linear", options)
    assert d.runs and d.kernel == "CUTLASS block FP8 (sm_120)", d.kernel
    assert d.mma == "qmma_e4m3"
    assert any("initialize_fp8_gemm_config" in r for r in d.reasons)


def test_block_fp8_dense_is_triton_on_sm110():
    d = _decision("fp8-block", "thor", "dense_linear")
    assert d.runs and d.kernel == "Triton w8a8_block_fp8_matmul (sm_11x)"


@pytest.mark.parametrize("gid,options,kernel", [
    ("h100", D, "DeepGEMM block FP8 (JIT)"),
    ("b200", D, "DeepGEMM block FP8 (JIT)"),
    ("b200", NO_DG, "FlashInfer block FP8 GEMM"),
    ("h100", NO_DG, "Triton w8a8_block_fp8_matmul"),
    ("rtx-4090", D, "Triton w8a8_block_fp8_matmul"),
])
def test_block_fp8_auto_order_elsewhere(gid, options, kernel):
    assert _decision("fp8-block", gid, "dense_linear", options).kernel == kernel


def test_explicit_deep_gemm_still_reaches_deepgemm_on_sm120():
    opts = InstallOptions(flags=(("fp8_gemm_backend", "deep_gemm"),))
    assert _decision("fp8-block", "rtx-5090", "dense_linear", opts).kernel == "DeepGEMM block FP8 (JIT)"


# ---------------------------------------------------------------- point 5: ModelOpt FP8 dense

@pytest.mark.parametrize("gid,mma", [("h100", "wgmma_e4m3"), ("b200", "tcgen05_e4m3"), ("rtx-5090", "qmma_e4m3")])
def test_modelopt_fp8_dense_runs_flashinfer_bmm_fp8(gid, mma):
    d = _decision("fp8-modelopt", gid, "dense_linear")
    assert d.runs and d.kernel == "FlashInfer bmm_fp8 (per-tensor FP8)" and d.mma == mma


@pytest.mark.parametrize("gid,options", [("rtx-4090", D), ("thor", D), ("h100", NO_FI)])
def test_modelopt_fp8_dense_cutlass_without_bmm(gid, options):
    assert _decision("fp8-modelopt", gid, "dense_linear", options).kernel == "CUTLASS FP8 (sgl-kernel fp8_scaled_mm)"


def test_modelopt_fp8_sm12x_small_m_path_is_named():
    d = _decision("fp8-modelopt", "rtx-5090", "dense_linear")
    assert any("try_sm120_fp8_linear" in r for r in d.reasons)
