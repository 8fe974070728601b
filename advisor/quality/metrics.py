"""Error statistics of one dequantized tensor against its reference, accumulated chunk by chunk.

Definitions (r = reference, c = candidate, e = c - r, sums over all elements in float64):
- relative error  = sqrt(sum e^2 / sum r^2)            (Frobenius, scale-free)
- SNR             = 10 log10(sum r^2 / sum e^2) dB     (the same number in decibels)
- cosine          = sum r c / sqrt(sum r^2 sum c^2)
- max abs error   = max |e|
- scale groups    = runs of `group` elements along a row (one scale each; FP8 per-tensor/channel:
                    runs of up to 128 elements). A group is *saturated* when an element at the
                    format's largest magnitude is off by more than half the top step (the
                    reference lies beyond the representable range: clipped, not rounded); a
                    group is *zero* when every candidate value is 0 but the reference is not.
- group factor    = sum r c / sum r^2 over a group: the slope of candidate on reference. A wrong
                    scale multiplies a whole group and moves the slope to that factor; rounding
                    noise, even GPTQ's error compensation, leaves it near 1. A group whose factor
                    is off by more than `limit` (as log2) is *suspect* (see verdict.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from advisor.quality.dequantize import Dequant

SUSPECT_KEEP = 64          # suspect groups remembered per tensor (the count is exact)
CLIP_MARGIN = 2.0          # x half the top step: rounding errs by <= 1/2 step, a BF16-stored INT8 scale adds <= 1/4


@dataclass(frozen=True)
class Group:
    row: int
    col: int               # first column of the group
    factor: float          # sum r c / sum r^2: 1.0 for a correct scale, 2.0 when the values are doubled
    error: float           # largest |error| in the group
    ref_amax: float        # largest |reference| in the group


@dataclass
class Accumulator:
    group: int
    limit: float                      # |log2(group factor)| beyond which a group is suspect
    n: int = 0
    ssr: float = 0.0
    sse: float = 0.0
    ssc: float = 0.0
    dot: float = 0.0
    sse_rtn: float = 0.0
    max_err: float = 0.0
    ref_amax: float = 0.0
    groups: int = 0
    saturated: int = 0
    zero: int = 0
    nonfinite: int = 0
    suspects: int = 0
    suspect_list: list[Group] = field(default_factory=list)

    def add(self, ref: np.ndarray, dq: Dequant, rtn: np.ndarray | None, row0: int) -> None:
        c = dq.values
        r, k = ref.shape
        finite = np.isfinite(c)
        if not finite.all():
            self.nonfinite += int((~finite).sum())
            c = np.where(finite, c, 0.0).astype(np.float32)
        err = c - ref
        r64, c64, e64 = ref.astype(np.float64), c.astype(np.float64), err.astype(np.float64)
        self.n += ref.size
        self.ssr += float(np.einsum("ij,ij->", r64, r64))
        self.sse += float(np.einsum("ij,ij->", e64, e64))
        self.ssc += float(np.einsum("ij,ij->", c64, c64))
        self.dot += float(np.einsum("ij,ij->", r64, c64))
        if rtn is not None:
            d = rtn.astype(np.float64) - r64
            self.sse_rtn += float(np.einsum("ij,ij->", d, d))
        abs_err = np.abs(err)
        if abs_err.size:
            self.max_err = max(self.max_err, float(abs_err.max()))
            self.ref_amax = max(self.ref_amax, float(np.abs(ref).max()))
        g = self.group if k % self.group == 0 else k
        shape = (r, k // g, g)
        ref_g = np.abs(ref).reshape(shape).max(axis=2)
        err_g = abs_err.reshape(shape).max(axis=2)
        # clipped: off the top code by more than a whole step, more than rounding and scale storage explain
        clipped = (dq.at_limit & (abs_err > dq.half_step * np.float32(CLIP_MARGIN))).reshape(shape).any(axis=2)
        zero = (c == 0).reshape(shape).all(axis=2) & (ref_g > 0)
        self.groups += ref_g.size
        self.saturated += int(clipped.sum())
        self.zero += int(zero.sum())
        rr = np.einsum("ijk,ijk->ij", r64.reshape(shape), r64.reshape(shape))
        rc = np.einsum("ijk,ijk->ij", r64.reshape(shape), c64.reshape(shape))
        with np.errstate(divide="ignore", invalid="ignore"):
            factor = np.where(rr > 0, rc / rr, 1.0)
            off = np.abs(np.log2(np.where(factor > 0, factor, 1e-30)))
        bad = ((rr > 0) & (off > self.limit)) | ~finite.reshape(shape).all(axis=2)
        if bad.any():
            rows, cols = np.nonzero(bad)
            self.suspects += rows.size
            room = SUSPECT_KEEP * 4 - len(self.suspect_list)   # keep spare ones: tiny groups are dropped later
            for i, j in zip(rows[:room], cols[:room]):
                f = float(factor[i, j]) if finite.reshape(shape)[i, j].all() else math.nan
                self.suspect_list.append(Group(row0 + int(i), int(j) * g, f, float(err_g[i, j]), float(ref_g[i, j])))


def snr_db(signal: float, noise: float) -> float:
    if noise <= 0:
        return math.inf
    if signal <= 0:
        return -math.inf
    return 10 * math.log10(signal / noise)


def served_snr_db(acc: Accumulator, factor: float) -> float:
    """SNR when every candidate value is multiplied by `factor` (an engine applying another global
    scale): sum (f c - r)^2 = f^2 sum c^2 - 2 f sum r c + sum r^2."""
    sse = factor * factor * acc.ssc - 2 * factor * acc.dot + acc.ssr
    return snr_db(acc.ssr, max(sse, 0.0))
