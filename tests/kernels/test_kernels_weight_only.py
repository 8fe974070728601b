"""GEMV and GEMM kernels vs a float64 numpy reference: every format, ragged N/K, split-K, both
operand orders; outputs poisoned with NaN first and checked fully written."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from kernels_reference import reference_weight, rel_err

from kernels import formats
from kernels.weight_only import GemmConfig, GemvConfig, gemm, gemv

# 16-bit operands: the dot / output rounding bounds the error; fp32: only summation order.
TOL = {torch.float16: 1e-2, torch.float32: 1e-5}

# (fmt, group, M, N, K): ragged N (not a multiple of BLOCK_N) and ragged K (not of BLOCK_K).
SHAPES = [
    ("nvfp4", 16, 1, 40, 144),
    ("nvfp4", 16, 3, 64, 128),
    ("fp8", 1, 3, 33, 100),
    ("fp8", 1, 1, 64, 192),
    ("int4", 128, 2, 24, 256),
    ("int4", 16, 4, 40, 144),
]
GEMV = [GemvConfig(block_n=32, block_k=64, split_k=1), GemvConfig(block_n=16, block_k=32, split_k=3),
        GemvConfig(block_n=16, block_k=128, split_k=2)]          # the benchmark candidates' BK
GEMM = [GemmConfig(block_m=16, block_n=32, block_k=64, split_k=1),
        GemmConfig(block_m=16, block_n=32, block_k=32, split_k=2, swap_ab=True)]


def _case(fmt, group, m, n, k, act, gen):
    w = formats.random_weight(fmt, n, k, generator=gen, group=group)
    a = formats.random_activations(m, k, act, generator=gen)
    return a, w, a.double().numpy() @ reference_weight(w).T


def _poisoned(m, n, dtype):
    return torch.full((m, n), float("nan"), dtype=dtype)


def _fits(cfg, fmt, group):
    bk = cfg.block_k
    return fmt != "int4" or bk % group == 0 or group % bk == 0


@pytest.mark.parametrize("act", [torch.float16, torch.float32], ids=["fp16", "fp32"])
@pytest.mark.parametrize("fmt,group,m,n,k", SHAPES)
def test_gemv_matches_reference(fmt, group, m, n, k, act, torch_gen):
    a, w, ref = _case(fmt, group, m, n, k, act, torch_gen)
    for cfg in GEMV:
        if not _fits(cfg, fmt, group):
            continue
        out = _poisoned(m, n, torch.float32 if cfg.split_k > 1 else act)
        got = gemv(a, w, cfg, out=out)
        assert got is out and not torch.isnan(out).any(), cfg
        assert rel_err(out, ref) < TOL[act], (cfg, rel_err(out, ref))


@pytest.mark.parametrize("act", [torch.float16, torch.float32], ids=["fp16", "fp32"])
@pytest.mark.parametrize("fmt,group,m,n,k", SHAPES)
def test_gemm_matches_reference(fmt, group, m, n, k, act, torch_gen):
    a, w, ref = _case(fmt, group, m, n, k, act, torch_gen)
    for cfg in GEMM:
        if not _fits(cfg, fmt, group):
            continue
        out = _poisoned(m, n, torch.float32 if cfg.split_k > 1 else act)
        gemm(a, w, cfg, out=out)
        assert not torch.isnan(out).any(), cfg
        assert rel_err(out, ref) < TOL[act], (cfg, rel_err(out, ref))


def test_gemm_several_row_tiles_and_grouped_order(torch_gen):
    """M spans several BLOCK_M tiles and GROUP_M reorders them: every tile still lands once."""
    a, w, ref = _case("nvfp4", 16, 40, 48, 64, torch.float16, torch_gen)
    out = _poisoned(40, 48, torch.float16)
    gemm(a, w, GemmConfig(block_m=16, block_n=16, block_k=64, group_m=2), out=out)
    assert not torch.isnan(out).any()
    assert rel_err(out, ref) < 1e-2


def test_bf16_activations_run_through_the_fp32_dot_in_the_interpreter(torch_gen):
    a, w, _ = _case("fp8", 1, 2, 32, 64, torch.bfloat16, torch_gen)
    ref = a.double().numpy() @ reference_weight(w).T          # the bf16 inputs, exactly
    out = gemm(a, w, GemmConfig(block_m=16, block_n=32, block_k=64))
    assert out.dtype == torch.bfloat16 and rel_err(out, ref) < 1e-2


def test_split_k_output_is_zeroed_before_accumulating(torch_gen):
    a, w, ref = _case("nvfp4", 16, 1, 32, 128, torch.float16, torch_gen)
    out = torch.full((1, 32), 1e6, dtype=torch.float32)       # stale data must not survive
    gemv(a, w, GemvConfig(block_n=32, block_k=32, split_k=2), out=out)
    assert rel_err(out, ref) < 1e-2


def test_bad_inputs_are_rejected_before_launch(torch_gen):
    w = formats.random_weight("nvfp4", 32, 64, generator=torch_gen)
    with pytest.raises(ValueError, match="do not match"):
        gemv(torch.zeros(1, 32, dtype=torch.float16), w)
    with pytest.raises(ValueError, match="out must be"):
        gemm(torch.zeros(1, 64, dtype=torch.float16), w, out=torch.empty(1, 32, dtype=torch.float32))
    w4 = formats.random_weight("int4", 32, 256, generator=torch_gen, group=128)
    with pytest.raises(ValueError, match="divide"):
        gemm(torch.zeros(1, 256, dtype=torch.float16), w4, GemmConfig(block_k=96))
    with pytest.raises(ValueError, match="K % 16"):
        formats.random_weight("nvfp4", 4, 40)


def test_random_weights_are_never_all_zero(torch_gen):
    for fmt in ("nvfp4", "fp8", "int4"):
        w = formats.random_weight(fmt, 16, 256, generator=torch_gen)
        assert np.abs(reference_weight(w)).max() > 0
        assert w.nbytes() == sum(t.numel() * t.element_size() for t in (w.wq, w.ws, w.gs) if t is not None)
