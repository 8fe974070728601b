"""Kernel tests run the real Triton kernels on CPU through the interpreter.

TRITON_INTERPRET is read when `@triton.jit` decorates, i.e. when kernels.* is first imported:
it is set here, before any test module of this folder imports them. The interpreter mishandles
bf16 arithmetic, so tests use fp16 and fp32 activations (the launchers switch bf16 dots to fp32
there). Every test draws fresh random inputs (seeded by the test's name for reproducible failures).
"""

from __future__ import annotations

import os
import zlib

os.environ["TRITON_INTERPRET"] = "1"

import numpy as np  # noqa: E402
import pytest  # noqa: E402

pytest.importorskip("torch")
pytest.importorskip("triton")

@pytest.fixture
def rng(request):
    """A numpy Generator seeded per test (fresh inputs per test, reproducible on failure)."""
    return np.random.default_rng(zlib.crc32(request.node.nodeid.encode()))


@pytest.fixture
def torch_gen(rng):
    import torch

    return torch.Generator().manual_seed(int(rng.integers(0, 2**31)))
