"""Bandwidth kernels and the torch baseline on CPU: exact results, every element written."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from kernels import bandwidth, baseline


@pytest.mark.parametrize("programs", [None, 3])
def test_copy_writes_every_element(rng, programs):
    n = 4096 * 5 + 123                              # ragged tail; 3 programs -> grid-stride loop
    x = torch.from_numpy(rng.standard_normal(n).astype(np.float32))
    y = torch.full_like(x, float("nan"))
    bandwidth.copy(x, y, block=4096, programs=programs)
    assert torch.equal(x, y)


@pytest.mark.parametrize("programs", [None, 2])
def test_read_sum_reads_every_element_once(rng, programs):
    n = 4096 * 3 + 77
    x = rng.standard_normal(n).astype(np.float32)
    partials = bandwidth.read_sum(torch.from_numpy(x), block=4096, programs=programs)
    assert partials.numel() == (programs or 4)
    assert abs(float(partials.double().sum()) - float(x.astype(np.float64).sum())) < 1e-3


@pytest.mark.parametrize("dtype,tol", [(torch.float32, 1e-5), (torch.float16, 1e-2)])
def test_baseline_matmul_matches_float64(torch_gen, dtype, tol):
    a = torch.randn((3, 96), generator=torch_gen).to(dtype)
    w = baseline.random_weight(40, 96, dtype, generator=torch_gen)
    ref = a.double().numpy() @ w.double().numpy().T
    out = torch.full((3, 40), float("nan"), dtype=dtype)
    baseline.matmul(a, w, out=out)
    err = np.abs(out.double().numpy() - ref).max() / np.abs(ref).max()
    assert err < tol and not torch.isnan(out).any()
    assert np.abs(baseline.matmul(a, w).double().numpy() - out.double().numpy()).max() == 0
