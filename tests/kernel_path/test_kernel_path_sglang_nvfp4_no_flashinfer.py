"""SGLang 0.5.23, ModelOpt NVFP4 on sm_11x/12x without FlashInfer: SGLang still selects its FlashInfer backends
(fp4_utils.py:154-160, modelopt_quant.py:3117-3123, the Nemotron-H override) and fails when they first run
(modelopt_quant.py:161-164 for the dense GEMM). Found by tests/conformance/sglang: the rules said "no
kernel" and quoted refusals that only fire below Blackwell."""

from __future__ import annotations

from dataclasses import replace

import pytest

from advisor.kernel_path.explain import explain
from advisor.kernel_path.options import InstallOptions

from kernel_path_builders import checkpoint, gpu

NO_FI = InstallOptions(flashinfer=False)


def _decision(ck, gid, layer_class, options=NO_FI):
    return next(d for d in explain(ck, gpu(gid), engine="sglang", options=options).decisions
                if d.layer_class == layer_class and d.checkpoint_scheme != "BF16")


@pytest.mark.parametrize("gid", ["thor", "rtx-5090", "gb10"])
def test_dense_nvfp4_selects_flashinfer_cutlass_then_fails(gid):
    d = _decision(checkpoint("nvfp4-w4a4"), gid, "dense_linear")
    assert d.kernel == "flashinfer_cutlass (NVFP4 W4A4)" and not d.runs
    assert d.error == "RuntimeError: NVFP4 GEMM requires flashinfer's mm_fp4; please install flashinfer."


@pytest.mark.parametrize("gid", ["thor", "rtx-5090", "gb10"])
def test_nvfp4_experts_select_flashinfer_trtllm_then_fail(gid):
    d = _decision(checkpoint("nvfp4-w4a4", moe=True), gid, "moe_experts")
    assert d.kernel == "flashinfer_trtllm (NVFP4 MoE)" and not d.runs
    assert "No module named 'flashinfer'" in d.error


def test_nemotron_h_nvfp4_experts_keep_the_override_without_flashinfer():
    ck = checkpoint("nvfp4-w4a4", moe=True, model_type="nemotron_h")
    ck = replace(ck, arch=replace(ck.arch, architectures=("NemotronHForCausalLM",)))
    d = _decision(ck, "rtx-5090", "moe_experts")
    assert d.kernel == "flashinfer_cutlass (NVFP4 MoE)" and not d.runs


def test_with_flashinfer_the_dense_layer_runs():
    d = _decision(checkpoint("nvfp4-w4a4"), "rtx-5090", "dense_linear", options=InstallOptions())
    assert d.kernel == "flashinfer_cutlass (NVFP4 W4A4)" and d.runs
