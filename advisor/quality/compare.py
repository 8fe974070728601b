"""`quality REFERENCE CANDIDATE`: dequantize every quantized weight of the candidate with our own
math, compare it with the matching reference weight, chunk by chunk (memory: a few chunks of
~256k values, never a whole tensor), and judge the result.

Two passes over the reference side: the first finds each tensor's amax (the global scale of a
round-to-nearest baseline; fused groups share theirs) and, for AWQ checkpoints whose smoothing is
folded into a previous linear layer, a per-column alignment; the second measures.
"""

from __future__ import annotations

import time
from pathlib import Path
from statistics import median
from typing import Callable

import numpy as np

from advisor.checkpoint import roles
from advisor.convert import rules
from advisor.convert.source import Checkpoint, model_type, open_checkpoint
from advisor.errors import BadInput
from advisor.quality import verdict as v
from advisor.quality.baseline import rtn
from advisor.quality.dequantize import Reader, chunk_rows
from advisor.quality.layouts import FLOAT_DTYPES, QuantTensor, detect, quant_config
from advisor.quality.metrics import Accumulator, served_snr_db, snr_db
from advisor.quality.reference import RefView, map_reference
from advisor.quality.results import ClassResult, QualityReport, ScaleGroupCheck, TensorResult
from advisor.quality.smoothing import folded_factors

Progress = Callable[[str, int, int, str], None]

# What engines do with unequal global scales in one fused GEMM (re-read at vLLM 0.33.0):
SERVED_SCALE = {
    "modelopt": ("max", "vllm/model_executor/layers/quantization/modelopt.py:2085-2093@0.33.0 "
                        "(weight_scale_2.max() over the fused shards)"),
    "compressed-tensors": ("min", "vllm/model_executor/layers/quantization/compressed_tensors/schemes/"
                                  "compressed_tensors_w4a4_nvfp4.py:102-111@0.33.0 (weight_global_scale.max(); "
                                  "it is stored as 1/scale)"),
}


def _refuse_quantized_reference(ref: Checkpoint) -> None:
    qc = quant_config(ref)
    if qc or ref.hf_quant_config is not None:
        what = qc.get("quant_method") or "hf_quant_config.json"
        raise BadInput(f"the reference is quantized ({what}); give the BF16/FP16 original it was made from",
                       path=str(ref.root))


def _global_values(qt: QuantTensor) -> np.ndarray:
    """The stored NVFP4 global scale(s) as amax/2688 (ModelOpt weight_scale_2; CT stores 1/that)."""
    from advisor.quality.layouts import read_small
    from advisor.quality.codecs import floats

    if qt.layout.producer == "modelopt":
        e = qt.parts["weight_scale_2"]
        return floats(read_small(e), e.dtype).reshape(-1)
    e = qt.parts["weight_global_scale"]
    with np.errstate(divide="ignore"):
        return (1.0 / floats(read_small(e), e.dtype).reshape(-1)).astype(np.float32)


def _amax_pass(qt: QuantTensor, view: RefView, reader: Reader, *, align: bool):
    """Per-expert amax of the reference, and (align=True) per-column least-squares factors that map
    the candidate onto the reference: f_k = sum_n r c / sum_n c^2."""
    per = qt.rows // qt.stack
    amax = np.zeros(qt.stack, np.float32)
    dot = np.zeros(qt.cols)   # filled only when aligning
    cc = np.zeros(qt.cols)
    step = chunk_rows(qt, reader)
    for a in range(0, qt.rows, step):
        b = min(qt.rows, a + step)
        ref = view.rows(a, b)
        for ex in range(a // per, (b - 1) // per + 1):
            lo, hi = max(a, ex * per), min(b, (ex + 1) * per)
            if hi > lo:
                amax[ex] = max(amax[ex], float(np.abs(ref[lo - a:hi - a]).max()))
        if align:
            c = reader.rows(a, b).values.astype(np.float64)
            dot += np.einsum("ij,ij->j", ref.astype(np.float64), c)
            cc += np.einsum("ij,ij->j", c, c)
    if not align:
        return amax, None
    with np.errstate(divide="ignore", invalid="ignore"):
        return amax, np.where(cc > 0, dot / cc, 1.0).astype(np.float32)


def compare(reference: Path, candidate: Path, *, progress: Progress | None = None) -> QualityReport:
    t0 = time.perf_counter()
    ref, cand = open_checkpoint(Path(reference)), open_checkpoint(Path(candidate))
    _refuse_quantized_reference(ref)
    qts, kept = detect(cand)
    if not qts:
        raise BadInput("the candidate has no quantized weights to check (every matrix is BF16/FP16/F32)",
                       path=str(cand.root))
    rows_of = {q.module: q.rows for q in qts}
    views = {q.name: map_reference(ref, q, rows_of) for q in qts}
    notes: list[str] = []
    factors = folded_factors(ref, cand, [q.module for q in qts])
    if factors:
        norms = sorted({n for _f, n in factors.values()})
        notes.append(f"smoothing folded into {len(norms)} norm(s) (e.g. {norms[0]}): the weights behind them are "
                     "compared as W x (candidate norm / reference norm), the weight the layer really applies")
    # pass 1: amax (and alignment for AWQ layers whose smoothing went into a previous linear)
    total = sum(q.rows * q.cols * 2 for q in qts)      # progress in reference (BF16) bytes
    done = 0
    amax: dict[str, np.ndarray] = {}
    aligned: dict[str, np.ndarray] = {}
    for q in qts:
        reader = Reader(q)
        try:
            align = q.layout.producer == "awq" and q.module not in factors
            amax[q.module], fac = _amax_pass(q, views[q.name], reader, align=align)
        finally:
            reader.close()
        if fac is not None:
            aligned[q.module] = fac
        done += q.rows * q.cols * 2
        if progress:
            progress("scan", done, total, q.name)
    if aligned:
        notes.append(f"{len(aligned)} AWQ weight(s) fed by another linear layer (e.g. {next(iter(aligned))}) are "
                     "aligned per input column by least squares before comparing: AutoAWQ folds their smoothing "
                     "into that layer. A wrong per-column scale would be hidden there")
    table, table_note = rules.table_for(model_type(cand.config))
    nv = [q for q in qts if q.layout.kind == "nvfp4"]
    group_amax: dict[str, np.ndarray] = {q.module: amax[q.module] for q in qts}
    groups = [(rule, members) for rule, members in rules.groups_from_table([q.module for q in nv], table)
              if len(members) > 1]
    for _rule, members in groups:
        if len({amax[m].shape for m in members}) == 1:
            joint = np.max([amax[m] for m in members], axis=0)
            for m in members:
                group_amax[m] = joint

    # pass 2: measure
    done = 0
    accs: dict[str, Accumulator] = {}
    results: list[TensorResult] = []
    for q in qts:
        acc = Accumulator(q.group, v.GROUP_FACTOR_LIMIT)
        col = factors[q.module][0] if q.module in factors else aligned.get(q.module)
        reader = Reader(q)
        try:
            step = chunk_rows(q, reader)
            amaxes = group_amax[q.module]
            glob = amaxes if amaxes.size > 1 else float(amaxes[0])
            for a in range(0, q.rows, step):
                b = min(q.rows, a + step)
                r = views[q.name].rows(a, b)
                dq = reader.rows(a, b)
                if col is not None:
                    dq = type(dq)((dq.values * col[None, :]).astype(np.float32), dq.at_limit,
                                  (dq.half_step * np.abs(col)[None, :]).astype(np.float32))
                acc.add(r, dq, rtn(q, r, global_amax=glob, row0=a), a)
                done += (b - a) * q.cols * 2
                if progress:
                    progress("compare", done, total, q.name)
        finally:
            reader.close()
        accs[q.module] = acc
        results.append(_result(q, views[q.name], acc, amax[q.module],
                               ("smoothing factors from " + factors[q.module][1],) if q.module in factors else
                               ("aligned per input column (AWQ smoothing folded into a previous layer)",)
                               if q.module in aligned else ()))
    checks = _scale_checks(nv, groups, accs)
    if groups:
        notes.append(f"fused groups from the {table_note}")
    kept_summary = _kept(ref, cand, kept)
    tensors = tuple(results)
    findings = v.findings(tensors, checks, kept_summary)
    formats = tuple(dict.fromkeys(q.layout.label for q in qts))
    verdict = v.judge(tensors, checks, findings, formats)
    return QualityReport(str(ref.root), str(cand.root), formats, tensors, _classes(tensors), checks, kept_summary,
                         findings, verdict, tuple(notes), time.perf_counter() - t0)


def _result(q: QuantTensor, view: RefView, acc: Accumulator, amax: np.ndarray, notes: tuple[str, ...]) -> TensorResult:
    tensor_amax = float(amax.max()) if amax.size else 0.0
    tiny = tensor_amax * v.TINY_GROUP
    broken = tuple(g for g in acc.suspect_list if g.ref_amax >= tiny or not np.isfinite(g.factor))
    # every suspect beyond the kept list is counted; tiny ones among the kept list are not
    dropped = len(acc.suspect_list) - len(broken)
    count = max(0, acc.suspects - dropped)
    cos_den = (acc.ssr * acc.ssc) ** 0.5
    return TensorResult(
        name=q.name, module=q.module, layer_class=roles.group_name(q.module), role=roles.role_of(q.module),
        format=q.layout.label, family=q.layout.family, shape=q.out_shape, reference=view.how,
        rel_error=(acc.sse / acc.ssr) ** 0.5 if acc.ssr > 0 else (0.0 if acc.sse == 0 else float("inf")),
        snr_db=snr_db(acc.ssr, acc.sse), rtn_snr_db=snr_db(acc.ssr, acc.sse_rtn),
        cosine=acc.dot / cos_den if cos_den > 0 else (1.0 if acc.sse == 0 else 0.0),
        max_abs_error=acc.max_err, ref_amax=acc.ref_amax, group_size=q.group if q.cols % q.group == 0 else q.cols,
        groups=acc.groups, saturated_groups=acc.saturated,
        zero_groups=acc.zero, nonfinite=acc.nonfinite, broken_groups=count, broken=broken[:8], notes=notes)


def _scale_checks(nv: list[QuantTensor], groups, accs: dict[str, Accumulator]) -> tuple[ScaleGroupCheck, ...]:
    by_module = {q.module: q for q in nv}
    out = []
    for rule, members in groups:
        vals = [_global_values(by_module[m]) for m in members]
        scales = tuple(float(x.max()) for x in vals)
        shared = all(np.array_equal(vals[0], x) for x in vals[1:])
        producer = by_module[members[0]].layout.producer
        how, source = SERVED_SCALE[producer]
        served: tuple[float, ...] = ()
        if not shared:
            target = max(scales) if how == "max" else min(scales)
            served = tuple(served_snr_db(accs[m], target / s) if s > 0 else float("-inf")
                           for m, s in zip(members, scales))
        out.append(ScaleGroupCheck(rule, tuple(members), scales, shared, served, source))
    return tuple(out)


def _kept(ref: Checkpoint, cand: Checkpoint, kept: list[str]) -> dict:
    """Floating-point matrices the candidate keeps: byte-identical to the reference or not."""
    from advisor.convert.verify import compare_tensor

    identical, different, missing = 0, [], []
    for name in kept:
        r = ref.tensors.get(name)
        c = cand.tensors[name]
        if r is None:
            missing.append(name)
        elif (r.dtype, r.shape) != (c.dtype, c.shape) or r.dtype not in FLOAT_DTYPES:
            different.append(name)
        elif compare_tensor(c, r, "other") is None:
            identical += 1
        else:
            different.append(name)
    return {"identical": identical, "different": different, "missing": missing}


def _classes(tensors: tuple[TensorResult, ...]) -> tuple[ClassResult, ...]:
    by: dict[tuple[str, str], list[TensorResult]] = {}
    for t in tensors:
        by.setdefault((t.layer_class, t.family), []).append(t)
    out = []
    for (cls, fam), ts in by.items():
        worst = min(ts, key=lambda t: t.snr_db)
        out.append(ClassResult(cls, fam, len(ts), median(t.snr_db for t in ts), worst.snr_db,
                               median(t.excess_db for t in ts), max(t.rel_error for t in ts), worst.name))
    return tuple(sorted(out, key=lambda c: c.layer_class))
