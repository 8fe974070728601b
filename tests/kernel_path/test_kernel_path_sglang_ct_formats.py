"""SGLang 0.5.23 and compressed-tensors layouts its scheme table routes specially (issue 26, conformance).

* MXFP4 (mxfp4-pack-quantized) dense layers have no compressed-tensors scheme: the model does not load.
* MXFP4 experts bypass the scheme table for Mxfp4MoEMethod, which upcasts them to BF16 on a non-gpt-oss model.
* INT4/INT8 weight-only experts run on Marlin (no GPU check), or on Triton on sm_10x when the layout allows.

Expected values are read off sglang/srt/layers/quantization/compressed_tensors/compressed_tensors.py@0.5.23
and were observed by tests/conformance/sglang (Kimi-K3 and Kimi-K2.5 configs).
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from advisor.checkpoint.model import ActQuant, WeightQuant
from advisor.kernel_path.explain import explain

from kernel_path_builders import checkpoint, gpu

MXFP4_W = WeightQuant(format="mxfp4", bits=4, granularity="mxfp4", group_size=32, block=None, symmetric=True)


def _with(ck, role: str, scheme: str, w: WeightQuant):
    mods = tuple(replace(m, scheme=scheme, weight=w, act=ActQuant()) if m.role == role else m for m in ck.modules)
    return replace(ck, modules=mods, producer="compressed-tensors")


def _decision(ck, gid, layer_class, scheme):
    return next(d for d in explain(ck, gpu(gid), engine="sglang").decisions
                if d.layer_class == layer_class and d.checkpoint_scheme == scheme)


@pytest.mark.parametrize("gid", ["t4", "a100", "h100", "b200", "rtx-5090"])
def test_ct_mxfp4_dense_layer_is_refused(gid):
    ck = _with(checkpoint("bf16", moe=True), "attn_qkv", "W4A16-MXFP4", MXFP4_W)
    d = _decision(ck, gid, "dense_linear", "W4A16-MXFP4")
    assert not d.runs
    assert d.error.startswith("NotImplementedError: No compressed-tensors compatible scheme was found.")


@pytest.mark.parametrize("gid", ["t4", "a100", "l40s", "h100"])
def test_ct_mxfp4_experts_upcast_to_bf16(gid):
    ck = _with(checkpoint("bf16", moe=True), "expert", "W4A16-MXFP4", MXFP4_W)
    d = _decision(ck, gid, "moe_experts", "W4A16-MXFP4")
    assert d.kernel == "triton fused_moe on BF16 experts (MXFP4 upcast at load)" and d.runs
    assert d.effective_scheme == "BF16"


def _ct_int4_experts(group=128, sym=True):
    w = WeightQuant(format="int4", bits=4, granularity="group", group_size=group, block=None, symmetric=sym)
    return _with(checkpoint("bf16", moe=True), "expert", "W4A16-INT4", w)


@pytest.mark.parametrize("gid,kernel", [
    ("t4", "Marlin MoE (WNA16)"),            # get_moe_scheme checks no capability (old rules: moe_wna16 triton)
    ("a100", "Marlin MoE (WNA16)"),
    ("h100", "Marlin MoE (WNA16)"),
    ("b200", "Triton WNA16 MoE (CompressedTensorsWNA16TritonMoE)"),
    ("b300", "Triton WNA16 MoE (CompressedTensorsWNA16TritonMoE)"),
    ("rtx-5090", "Marlin MoE (WNA16)"),
])
def test_ct_int4_experts(gid, kernel):
    d = _decision(_ct_int4_experts(), gid, "moe_experts", "W4A16-INT4")
    assert d.kernel == kernel


def test_ct_int4_experts_with_group_64_stay_on_marlin_on_sm10x():
    assert _decision(_ct_int4_experts(group=64), "b200", "moe_experts", "W4A16-INT4").kernel == "Marlin MoE (WNA16)"
