"""Byte-for-byte checks of NVFP4 checkpoints against a ModelOpt reference.

Three modes:
- compare: a candidate NVFP4 folder against the reference (names, dtypes, shapes, shards,
  quantization config, and every tensor's bytes);
- convert+compare: a BF16 candidate is converted with the reference's choices, then compared;
- round trip: the reference is dequantized to BF16 (a stored FP4 -0 stays -0.0), requantized with
  this converter's arithmetic and fused-group table, and compared with itself. Nothing is written.

In the round trip two kinds of block do not determine their scale from their dequantized values,
so differences there are inherent, not faults: a block whose codes are all (+/-)0 (any scale
dequantizes to zeros; requantizing gives ModelOpt's zero-block scale 1.0), and a block whose E4M3
scale is subnormal (2..7 x 2^-9) with no code at 6.0 (a larger scale with smaller codes gives the
same numbers). Those blocks are counted apart and do not fail the check.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from advisor.convert import nvfp4_math as m
from advisor.convert import rules
from advisor.convert.converter import Progress, convert, quantize_chunks
from advisor.convert.plan import Options, reference_format, reference_modules, scalar_bytes
from advisor.convert.safetensors_io import DTYPE_SIZES, NUMPY_VIEW, RowReader, TensorEntry, read_bytes
from advisor.convert.source import Checkpoint, model_type, open_checkpoint

FIRST_POSITIONS = 5
CHUNK_BYTES = 32 << 20


@dataclass(frozen=True)
class TensorDiff:
    name: str
    kind: str                      # weight | weight_scale | weight_scale_2 | input_scale | other
    differing_bytes: int
    total_bytes: int
    first_positions: tuple[tuple[int, ...], ...]   # element indices of the first differences
    fails: bool = True
    note: str = ""


@dataclass(frozen=True)
class VerifyReport:
    mode: str
    candidate: str | None
    reference: str
    tensors_compared: int
    bytes_compared: int
    structure: tuple[str, ...]             # name/dtype/shape/shard/config problems
    diffs: tuple[TensorDiff, ...]
    notes: tuple[str, ...] = field(default_factory=tuple)
    undetermined_blocks: int = 0

    @property
    def identical(self) -> bool:
        return not self.structure and not any(d.fails for d in self.diffs)


def kind_of(name: str) -> str:
    for suffix in ("weight_scale_2", "weight_scale", "input_scale"):
        if name.endswith("." + suffix):
            return suffix
    return "other"


def _positions(diff_flat_idx: np.ndarray, elem_size: int, shape: tuple[int, ...]) -> tuple[tuple[int, ...], ...]:
    out = []
    for b in diff_flat_idx[:FIRST_POSITIONS]:
        el = int(b) // elem_size
        out.append(tuple(int(x) for x in np.unravel_index(el, shape)) if shape else ())
    return tuple(dict.fromkeys(out))


def compare_tensor(a: TensorEntry, b: TensorEntry, kind: str) -> TensorDiff | None:
    """Compare the raw bytes of two tensors of the same dtype/shape in chunks."""
    size = DTYPE_SIZES[b.dtype]
    count = 0
    first: list = []
    for start in range(0, b.nbytes, CHUNK_BYTES):
        length = min(CHUNK_BYTES, b.nbytes - start)
        x = np.frombuffer(read_bytes(a, start, length), np.uint8)
        y = np.frombuffer(read_bytes(b, start, length), np.uint8)
        idx = np.flatnonzero(x != y)
        count += idx.size
        if len(first) < FIRST_POSITIONS and idx.size:
            first += list(idx[: FIRST_POSITIONS - len(first)] + start)
    if not count:
        return None
    fails, note = True, ""
    if kind == "input_scale":
        fails = False
        note = "activation scale depends on calibration data; weight-only runtimes ignore it"
    return TensorDiff(b.name, kind if kind != "other" else ("weight" if b.dtype == "U8" else "other"),
                      count, b.nbytes, _positions(np.array(first), size, b.shape), fails, note)


def _config_problems(cand: Checkpoint, ref: Checkpoint) -> list[str]:
    out = []
    cq = (cand.hf_quant_config or {}).get("quantization") or {}
    rq = (ref.hf_quant_config or {}).get("quantization") or {}
    for key in ("quant_algo", "group_size", "kv_cache_quant_algo", "exclude_modules"):
        if cq.get(key) != rq.get(key):
            out.append(f"hf_quant_config.json {key}: candidate {cq.get(key)!r}, reference {rq.get(key)!r}")
    ccfg, rcfg = cand.config.get("quantization_config"), ref.config.get("quantization_config")
    if rcfg is not None and ccfg != rcfg:
        keys = sorted(k for k in set(ccfg or {}) | set(rcfg) if (ccfg or {}).get(k) != rcfg.get(k))
        out.append(f"config.json quantization_config differs in {', '.join(keys)}")
    return out


def compare_checkpoints(cand: Checkpoint, ref: Checkpoint, *, mode: str = "compare",
                        notes: tuple[str, ...] = ()) -> VerifyReport:
    structure: list[str] = []
    missing = [n for n in ref.tensors if n not in cand.tensors]
    extra = [n for n in cand.tensors if n not in ref.tensors]
    if missing:
        structure.append(f"{len(missing)} tensor(s) missing from the candidate, e.g. {missing[0]}")
    if extra:
        structure.append(f"{len(extra)} tensor(s) not in the reference, e.g. {extra[0]}")
    diffs: list[TensorDiff] = []
    moved = []
    compared = nbytes = 0
    for name, r in ref.tensors.items():
        c = cand.tensors.get(name)
        if c is None:
            continue
        if (c.dtype, c.shape) != (r.dtype, r.shape):
            structure.append(f"{name}: candidate {c.dtype} {list(c.shape)}, reference {r.dtype} {list(r.shape)}")
            continue
        if cand.weight_map[name] != ref.weight_map[name]:
            moved.append(name)
        d = compare_tensor(c, r, kind_of(name))
        compared += 1
        nbytes += r.nbytes
        if d is not None:
            diffs.append(d)
    if moved:
        structure.append(f"sharding: {len(moved)} tensor(s) in a different file than in the reference, "
                         f"e.g. {moved[0]} ({cand.weight_map[moved[0]]} vs {ref.weight_map[moved[0]]})")
    structure += _config_problems(cand, ref)
    return VerifyReport(mode, str(cand.root), str(ref.root), compared, nbytes, tuple(structure),
                        tuple(diffs), notes)


def _is_quantized(ck: Checkpoint) -> bool:
    return ck.hf_quant_config is not None or isinstance(ck.config.get("quantization_config"), dict)


def verify(candidate: Path | None, reference: Path, *, threads: int = 1,
           progress: Progress | None = None) -> VerifyReport:
    ref = open_checkpoint(Path(reference))
    reference_format(ref)
    if candidate is None:
        return roundtrip(ref, threads=threads, progress=progress)
    cand = open_checkpoint(Path(candidate))
    if _is_quantized(cand):
        return compare_checkpoints(cand, ref)
    with tempfile.TemporaryDirectory(prefix="nvfp4-verify-") as tmp:
        out = Path(tmp) / "converted"
        convert(Path(candidate), out, reference=Path(reference), options=Options(threads=threads),
                progress=progress)
        rep = compare_checkpoints(open_checkpoint(out), ref, mode="convert+compare",
                                  notes=(f"{candidate} was converted with the reference's choices, then compared",))
    # the temporary folder is gone: name the folder the user gave
    return replace(rep, candidate=str(candidate))


# ------------------------------------------------------------------ round trip

def _ref_rows(ref: Checkpoint, module: str):
    w = ref.tensors[module + ".weight"]
    s = ref.tensors[module + ".weight_scale"]
    return w, s


def roundtrip(ref: Checkpoint, *, threads: int = 1, progress: Progress | None = None,
              chunk_elements: int = 1 << 16) -> VerifyReport:
    order = {n: i for i, n in enumerate(ref.tensors)}
    modules = sorted(reference_modules(ref), key=lambda x: order[x + ".weight"])
    notes = []
    problems = []
    ref_wsf2: dict[str, np.float32] = {}
    for mod in modules:
        raw = scalar_bytes(ref, mod + ".weight_scale_2")
        if raw is None:
            problems.append(f"{mod}: no weight_scale_2")
            continue
        ref_wsf2[mod] = np.frombuffer(raw, np.float32)[0]
        w, s = _ref_rows(ref, mod)
        if s.shape != (w.shape[0], w.shape[1] * 2 // m.BLOCK):
            problems.append(f"{mod}: weight_scale shape {list(s.shape)} does not match weight {list(w.shape)}")
    modules = [x for x in modules if x in ref_wsf2 and not any(p.startswith(x + ":") for p in problems)]
    total = sum(ref.tensors[x + ".weight"].nbytes for x in modules) * 2

    def deq_reader(mod: str):
        w, s = _ref_rows(ref, mod)
        rw, rs = RowReader(w), RowReader(s)
        wsf2 = ref_wsf2[mod]

        def rows(a: int, b: int) -> np.ndarray:
            return m.f32_to_bf16(m.dequantize(rw.rows(a, b), rs.rows(a, b), wsf2))
        return rows, (rw, rs)

    # global scales from the dequantized BF16, fused per this converter's name table
    amax: dict[str, float] = {}
    done = 0
    for mod in modules:
        rows, readers = deq_reader(mod)
        n = ref.tensors[mod + ".weight"].shape[0]
        best = 0
        step = max(1, chunk_elements // ref.tensors[mod + ".weight"].shape[1] // 2)
        for a in range(0, n, step):
            best = max(best, int(m.amax_of_bf16(rows(a, min(n, a + step)))))
        for r in readers:
            r.close()
        amax[mod] = float(m.bf16_to_f32(np.array([best], np.uint16))[0])
        done += ref.tensors[mod + ".weight"].nbytes
        if progress:
            progress("scan", done, total, mod)
    table, table_note = rules.table_for(model_type(ref.config))
    notes.append(f"fused groups from the {table_note}")
    ours: dict[str, np.float32] = {}
    for _rule, members in rules.groups_from_table(modules, table):
        g = m.global_scale(max(amax[x] for x in members))
        for x in members:
            ours[x] = g

    diffs: list[TensorDiff] = []
    undetermined = 0
    nbytes = 0
    for mod in modules:
        w, s = _ref_rows(ref, mod)
        n, half = w.shape
        k = half * 2
        nbytes += w.nbytes + s.nbytes + 4
        if ours[mod].tobytes() != ref_wsf2[mod].tobytes():
            diffs.append(TensorDiff(mod + ".weight_scale_2", "weight_scale_2", 4, 4, ((),), True,
                                    f"ours {float(ours[mod]):.9g}, reference {float(ref_wsf2[mod]):.9g} "
                                    "(fused-group membership differs?)"))
        rows, readers = deq_reader(mod)
        rw, rs = RowReader(w), RowReader(s)
        wd = sd = wu = su = 0
        wfirst: list[tuple[int, int]] = []
        sfirst: list[tuple[int, int]] = []
        row = 0
        for packed, scale in quantize_chunks(rows, (n, k), "BF16", ours[mod], threads=threads,
                                             chunk_elements=chunk_elements, signed_zero=True):
            r = packed.shape[0]
            ref_p, ref_s = rw.rows(row, row + r), rs.rows(row, row + r)
            codes = np.maximum(ref_p & 7, (ref_p >> 4) & 7).reshape(r, -1, m.BLOCK // 2).max(axis=2)
            undet = ((ref_s >= 2) & (ref_s < 8) & (codes < 7)) | (codes == 0)
            pdiff = packed != ref_p
            sdiff = scale != ref_s
            p_undet = pdiff & np.repeat(undet, m.BLOCK // 2, axis=1)
            s_undet = sdiff & undet
            wu += int(p_undet.sum())
            su += int(s_undet.sum())
            undetermined += int((undet & (sdiff | pdiff.reshape(r, -1, m.BLOCK // 2).any(axis=2))).sum())
            pdiff &= ~p_undet
            sdiff &= ~s_undet
            wd += int(pdiff.sum())
            sd += int(sdiff.sum())
            for arr, lst in ((pdiff, wfirst), (sdiff, sfirst)):
                if len(lst) < FIRST_POSITIONS and arr.any():
                    ii, jj = np.nonzero(arr)
                    lst += [(int(i) + row, int(j)) for i, j in zip(ii[:FIRST_POSITIONS], jj[:FIRST_POSITIONS])]
            row += r
            done += r * half
            if progress:
                progress("write", done, total, mod)
        for rd in (*readers, rw, rs):
            rd.close()
        if wd:
            diffs.append(TensorDiff(mod + ".weight", "weight", wd, w.nbytes, tuple(wfirst[:FIRST_POSITIONS])))
        if sd:
            diffs.append(TensorDiff(mod + ".weight_scale", "weight_scale", sd, s.nbytes,
                                    tuple(sfirst[:FIRST_POSITIONS])))
        if wu or su:
            diffs.append(TensorDiff(mod + ".weight", "undetermined", wu + su, w.nbytes + s.nbytes, (), False,
                                    "blocks whose scale the dequantized values do not determine"))
    if undetermined:
        notes.append(f"{undetermined} block(s) are all zero codes, or have a subnormal scale and no code at "
                     "6.0: their scale is not recoverable from dequantized values; differences there do not "
                     "fail the check")
    return VerifyReport("roundtrip", None, str(ref.root), len(modules) * 3, nbytes, tuple(problems),
                        tuple(diffs), tuple(notes), undetermined)


def dequantize_module(ref: Checkpoint, module: str) -> np.ndarray:
    """Whole-tensor BF16 bits of a reference module (tests and small tools)."""
    w, s = _ref_rows(ref, module)
    wsf2_bytes = scalar_bytes(ref, module + ".weight_scale_2")
    if wsf2_bytes is None:
        raise KeyError(module + ".weight_scale_2")   # as _ref_rows does for a missing weight
    wsf2 = np.frombuffer(wsf2_bytes, np.float32)[0]
    packed = np.frombuffer(read_bytes(w), NUMPY_VIEW["U8"]).reshape(w.shape)
    scale = np.frombuffer(read_bytes(s), np.uint8).reshape(s.shape)
    return m.f32_to_bf16(m.dequantize(packed, scale, wsf2))
