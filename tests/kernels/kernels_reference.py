"""Float64 references for the kernel tests (importable: unique name)."""

from __future__ import annotations

import numpy as np

E2M1 = np.array([0, .5, 1, 1.5, 2, 3, 4, 6, -0., -.5, -1, -1.5, -2, -3, -4, -6], dtype=np.float64)


def e4m3_to_f64(b: np.ndarray) -> np.ndarray:
    """Independent E4M3FN decoder (bias 7, subnormals, 0x7F/0xFF NaN) from the bit fields."""
    b = b.astype(np.int64)
    e, m = (b >> 3) & 0xF, b & 7
    v = np.where(e == 0, m / 8 * 2.0 ** -6, (1 + m / 8) * 2.0 ** (e - 7))
    v = np.where((b & 0x7F) == 0x7F, np.nan, v)
    return np.where(b & 0x80, -v, v)


def unpack_nibbles(q: np.ndarray) -> np.ndarray:
    """uint8 [N, K/2] -> codes [N, K], low nibble = even k."""
    return np.stack([q & 0xF, q >> 4], axis=-1).reshape(q.shape[0], -1).astype(np.int64)


def reference_weight(w) -> np.ndarray:
    """float64 W[N, K] of a kernels.weight_only.Weight, decoded with numpy only."""
    import torch

    if w.fmt == "nvfp4":
        scale = np.repeat(e4m3_to_f64(w.ws.view(torch.uint8).numpy()), 16, axis=1)
        return E2M1[unpack_nibbles(w.wq.numpy())] * scale * float(w.gs.item())
    if w.fmt == "fp8":
        return e4m3_to_f64(w.wq.view(torch.uint8).numpy()) * w.ws.double().numpy()[:, None]
    # INT4 contract: (q - 8) * s is an exact fp32 product rounded once to fp16 (the MMA operand).
    codes = unpack_nibbles(w.wq.numpy())
    exact = (codes - 8).astype(np.float32) * np.repeat(w.ws.float().numpy(), w.group, axis=1)
    return exact.astype(np.float16).astype(np.float64)


def rel_err(out, ref: np.ndarray) -> float:
    got = out.double().numpy() if hasattr(out, "numpy") else np.asarray(out, dtype=np.float64)
    return float(np.abs(got - ref).max() / np.abs(ref).max())
