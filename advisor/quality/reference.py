"""Where a candidate's quantized weight lives in the BF16 reference: same name, the same matrix
split into projections (a fused qkv_proj against q/k/v), one slice of a fused reference tensor
(q_proj against qkv_proj), or gpt-oss's transposed expert stacks ([E, in, out] in BF16 against
[E, out, in/32, 16] blocks). A view reads row ranges of the candidate's logical matrix from the
reference as float32, so both sides stream in the same chunks.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from advisor.convert.safetensors_io import NUMPY_VIEW, TensorEntry
from advisor.convert.source import Checkpoint
from advisor.errors import BadInput
from advisor.quality.codecs import floats
from advisor.quality.layouts import FLOAT_DTYPES, QuantTensor

# Fused projections and the split projections they stand for, in row order (HF modeling code:
# Phi-3 qkv_proj / gate_up_proj, Mixtral-style w1/w3, Qwen3-Next in_proj_qkvz).
FUSED_SPLITS: dict[str, tuple[str, ...]] = {
    "qkv_proj": ("q_proj", "k_proj", "v_proj"),
    "gate_up_proj": ("gate_proj", "up_proj"),
    "w13": ("w1", "w3"),
}
_PREFIX_ALIASES = (("model.language_model.", "model."), ("model.", "model.language_model."))


@dataclass(frozen=True)
class Segment:
    entry: TensorEntry
    start: int            # first logical row this segment provides
    stop: int
    src_row: int          # first row inside the entry (2-D view)
    transposed: bool = False


@dataclass(frozen=True)
class RefView:
    candidate: str
    how: str              # same name | split | slice | transposed
    names: tuple[str, ...]
    segments: tuple[Segment, ...]
    cols: int

    def rows(self, a: int, b: int) -> np.ndarray:
        out = np.empty((b - a, self.cols), np.float32)
        for s in self.segments:
            lo, hi = max(a, s.start), min(b, s.stop)
            if lo >= hi:
                continue
            e = s.entry
            if s.transposed:                        # [E, K, N]: logical row e*N + n is column n of expert e
                E, K, N = e.shape
                mm = np.memmap(e.file, NUMPY_VIEW[e.dtype], "r", offset=e.offset, shape=(E, K, N))
                r = lo
                while r < hi:
                    ex, n0 = divmod(r - s.start, N)
                    n1 = min(N, n0 + hi - r)
                    out[r - a: r - a + n1 - n0] = floats(np.ascontiguousarray(mm[ex, :, n0:n1].T), e.dtype)
                    r += n1 - n0
                continue
            rows = e.shape[-2] * (e.shape[0] if len(e.shape) == 3 else 1)
            mm = np.memmap(e.file, NUMPY_VIEW[e.dtype], "r", offset=e.offset, shape=(rows, e.shape[-1]))
            first = s.src_row + lo - s.start
            out[lo - a: hi - a] = floats(np.asarray(mm[first: first + hi - lo]), e.dtype)
        return out


def _matrix(e: TensorEntry | None) -> tuple[int, int] | None:
    if e is None or e.dtype not in FLOAT_DTYPES or len(e.shape) < 2:
        return None
    rows = e.shape[-2] * (e.shape[0] if len(e.shape) == 3 else 1)
    return rows, e.shape[-1]


def _names(name: str) -> list[str]:
    out = [name]
    for a, b in _PREFIX_ALIASES:
        if name.startswith(a):
            out.append(b + name[len(a):])
    return out


def map_reference(ref: Checkpoint, qt: QuantTensor, candidate_rows: dict[str, int]) -> RefView:
    """The reference view of `qt`. `candidate_rows` maps the candidate's quantized modules to their
    row counts (to place a split projection inside a fused reference tensor). Raises BadInput."""
    tried: list[str] = []
    for name in _names(qt.name):
        e = ref.tensors.get(name)
        tried.append(name)
        if e is None:
            continue
        if e.dtype not in FLOAT_DTYPES:
            raise BadInput(f"reference tensor {name} is {e.dtype}, not BF16/FP16/F32: give the unquantized "
                           "original as the reference", path=str(ref.root))
        if qt.layout.producer == "gpt-oss" and tuple(e.shape) == qt.out_shape:
            return RefView(qt.name, "transposed", (name,), (Segment(e, 0, qt.rows, 0, True),), qt.cols)
        if _matrix(e) == (qt.rows, qt.cols):
            return RefView(qt.name, "same name", (name,), (Segment(e, 0, qt.rows, 0),), qt.cols)
        raise BadInput(f"shape mismatch: candidate {qt.name} dequantizes to {list(qt.out_shape)}, reference "
                       f"{name} is {list(e.shape)}", path=str(ref.root))
    parent, _, leaf = qt.module.rpartition(".")
    suffix = qt.name[len(qt.module):]
    if leaf in FUSED_SPLITS:                                    # candidate fused, reference split
        for p in _names(parent):
            parts = [ref.tensors.get(f"{p}.{m}{suffix}") for m in FUSED_SPLITS[leaf]]
            tried.append(f"{p}.{{{','.join(FUSED_SPLITS[leaf])}}}{suffix}")
            found = [(e, shape) for e in parts if e is not None and (shape := _matrix(e)) is not None]
            if len(found) == len(parts) and all(cols == qt.cols for _, (_, cols) in found):
                segs, start = [], 0
                for e, (n, _) in found:
                    segs.append(Segment(e, start, start + n, 0))
                    start += n
                if start != qt.rows:
                    raise BadInput(f"shape mismatch: candidate {qt.name} has {qt.rows} rows, the reference's split "
                                   f"projections have {start}", path=str(ref.root))
                return RefView(qt.name, "split", tuple(e.name for e, _ in found), tuple(segs), qt.cols)
    for fused, members in FUSED_SPLITS.items():                  # candidate split, reference fused
        if leaf not in members:
            continue
        for p in _names(parent):
            e = ref.tensors.get(f"{p}.{fused}{suffix}")
            tried.append(f"{p}.{fused}{suffix}")
            if e is None:
                continue
            offset = 0
            for m in members[: members.index(leaf)]:
                if f"{parent}.{m}" not in candidate_rows:
                    raise BadInput(f"cannot place {qt.name} inside reference {e.name}: the candidate has no "
                                   f"{parent}.{m}", path=str(ref.root))
                offset += candidate_rows[f"{parent}.{m}"]
            mat = _matrix(e)
            if mat is None or mat[1] != qt.cols or offset + qt.rows > mat[0]:
                raise BadInput(f"shape mismatch: candidate {qt.name} [{qt.rows}, {qt.cols}] at row {offset} does "
                               f"not fit reference {e.name} {list(e.shape)}", path=str(ref.root))
            return RefView(qt.name, "slice", (e.name,), (Segment(e, 0, qt.rows, offset),), qt.cols)
    raise BadInput(f"missing tensor: the reference has no {qt.name} for the candidate's {qt.layout.label} weight "
                   f"(tried {', '.join(dict.fromkeys(tried))})", path=str(ref.root))
