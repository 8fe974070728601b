"""The compatibility matrix: one checkpoint across many GPUs and engines, the table users compare.

Per GPU x engine: does it run, what scheme really runs, on which kernel and MMA class, the
predicted decode and prefill speed, the longest context at batch 1 and 4, and whether it fits in
memory at all. Every cell comes from ``explain`` + ``make_plan`` (the same numbers `plan` shows);
a cell that cannot be computed says why instead of failing the whole table.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Sequence

from advisor import engines as engine_registry
from advisor.doc import Block, Heatmap, Table, na
from advisor.errors import AdvisorError

CONTEXT_BATCHES = (1, 4)


@dataclass(frozen=True)
class Cell:
    gpu_id: str
    gpu_name: str
    engine: str                         # column label: the engine, or engine@version when asked
    engine_version: str | None
    runs: bool                          # every layer class has a working path (explain)
    checkpoint_scheme: str | None       # what the checkpoint declares for that layer class
    effective_scheme: str | None        # of the layer class that moves most weight bytes
    kernel: str | None
    mma: str | None
    decode_tok_s: float | None          # single stream
    prefill_tok_s: float | None
    max_context: dict[int, int]         # batch -> longest context per request (tokens)
    fits: bool | None                   # weights + reserves leave a KV pool (None: not computed)
    kv_cache_dtype: str | None          # the recommended KV dtype the context figures assume
    note: str = ""                      # why a value is missing / what fails

    def to_json(self) -> dict:
        return {
            "gpu_id": self.gpu_id, "gpu_name": self.gpu_name, "engine": self.engine,
            "engine_version": self.engine_version, "runs": self.runs,
            "checkpoint_scheme": self.checkpoint_scheme,
            "effective_scheme": self.effective_scheme, "kernel": self.kernel, "mma": self.mma,
            "decode_tok_s": _r(self.decode_tok_s), "prefill_tok_s": _r(self.prefill_tok_s),
            "max_context": {str(b): c for b, c in self.max_context.items()},
            "fits": self.fits, "kv_cache_dtype": self.kv_cache_dtype, "note": self.note,
        }


@dataclass(frozen=True)
class Matrix:
    checkpoint: str
    checkpoint_label: str
    gpus: int                           # identical cards per cell
    workload: str
    engines: tuple[str, ...]
    cells: tuple[Cell, ...]             # GPU-major, engines in the order asked

    def cell(self, gpu_id: str, engine: str) -> Cell | None:
        return next((c for c in self.cells if c.gpu_id == gpu_id and c.engine == engine), None)

    @property
    def gpu_ids(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(c.gpu_id for c in self.cells))

    def to_json(self) -> dict:
        return {"checkpoint": self.checkpoint, "checkpoint_label": self.checkpoint_label, "gpus": self.gpus,
                "workload": self.workload, "engines": list(self.engines),
                "cells": [c.to_json() for c in self.cells]}


def _r(v: float | None) -> float | None:
    return None if v is None else float(f"{v:.4g}")


def primary_decision(explanation, checkpoint=None):
    """The decision that moves most weight bytes: quantized experts, else quantized dense layers
    (with the checkpoint, the one whose modules hold the most bytes: mixed checkpoints)."""
    def weight(d) -> int:
        if checkpoint is None:
            return 0
        return sum(m.stored_bytes for m in checkpoint.modules if m.role in d.roles and m.scheme == d.checkpoint_scheme)

    for cls in ("moe_experts", "dense_linear"):
        ds = [d for d in explanation.decisions if d.layer_class == cls and d.checkpoint_scheme not in ("BF16", "FP16")]
        if ds:
            return max(ds, key=weight)          # max keeps the first of equals: explain's order
    for cls in ("dense_linear", "moe_experts"):
        for d in explanation.decisions:
            if d.layer_class == cls:
                return d
    return explanation.decisions[0] if explanation.decisions else None


def compute_matrix(checkpoint, gpus: Sequence, engines: Iterable[str] = (engine_registry.DEFAULT,), *, count: int = 1,
                   workload=None, options=None, overrides=None, calibrations: dict | None = None) -> Matrix:
    """explain + make_plan for every GPU spec in ``gpus`` x engine (``E`` or ``E@VERSION``).

    ``workload``: a Workload or a profile name; ``calibrations``: gpu id -> Calibration, used for
    the cells of those GPUs (as `plan` does). The KV dtypes the tuner may pick are the ones the
    engine's attention rules accept on each GPU, exactly as in `plan`.
    """
    from advisor.cost.workload import Workload, get_workload

    wl = workload if isinstance(workload, Workload) else get_workload(workload or "interactive")
    specs = tuple(dict.fromkeys(engines))
    names = tuple(_engine_name(s) for s in specs)
    per_engine = {spec: _explain_all(checkpoint, spec, gpus, count, options) for spec in specs}
    cells = []
    for i, gpu in enumerate(gpus):
        for spec in specs:
            exps, kvd, err = per_engine[spec]
            if err is not None:
                cells.append(Cell(gpu.id, gpu.name, _engine_name(spec), None, False, None, None, None, None, None,
                                  None, {}, None, None, err))
                continue
            cal = (calibrations or {}).get(gpu.id)
            cells.append(_cell(checkpoint, exps[i], gpu, count, wl, overrides, {k: v[i] for k, v in kvd.items()},
                               cal, _engine_name(spec)))
    return Matrix(checkpoint.source, checkpoint.label, count, wl.name, names, tuple(cells))


def _engine_name(spec: str) -> str:
    """The column label: the engine, with the version when one was asked for (vllm@0.33)."""
    name, _, version = spec.partition("@")
    return name.strip().lower() + (f"@{version.strip()}" if version.strip() else "")


def _explain_all(checkpoint, spec: str, gpus: Sequence, count: int, options):
    """(explanations, {kv dtype: attention decision per GPU}, error) for one engine over all GPUs."""
    from dataclasses import replace as _replace

    from advisor.cost.engine_profile import load_engine_memory
    from advisor.kernel_path.explain import explain_all_gpus
    from advisor.kernel_path.options import InstallOptions
    from advisor.kernel_path.rule_versions import parse_engine_spec

    base = options or InstallOptions()
    try:
        engine, version = parse_engine_spec(spec)
        exps = explain_all_gpus(checkpoint, engine, version=version, options=base, gpus=count, table=gpus)
    except AdvisorError as err:
        return None, {}, str(err)
    kvd: dict[str, tuple] = {}
    if base.kv_cache_dtype is None:
        try:
            names = load_engine_memory(engine).kv_tune
        except AdvisorError:
            names = ()
        # Only the attention decision is needed per KV dtype; it depends on the architecture, the
        # producer and the declared KV quantization, not on the linear modules (skipped: 4x faster).
        attention_only = _replace(checkpoint, modules=(), kept_bf16=())
        for name in names:
            try:
                per_gpu = explain_all_gpus(attention_only, engine, version=version, gpus=count, table=gpus,
                                           options=_replace(base, kv_cache_dtype=name))
            except AdvisorError:
                continue
            kvd[name] = tuple(next((d for d in e.decisions if d.layer_class == "attention_kv"), None)
                              for e in per_gpu)
    kvd = {k: v for k, v in kvd.items() if all(d is not None for d in v)}
    return exps, kvd, None


def _cell(checkpoint, exp, gpu, count: int, workload, overrides, kv_decisions, calibration, label: str) -> Cell:
    from advisor.cost.engine_profile import load_engine_memory
    from advisor.cost.kv import layout
    from advisor.cost.overrides import Overrides
    from advisor.cost.plan import make_plan

    d = primary_decision(exp, checkpoint)
    base = dict(gpu_id=gpu.id, gpu_name=gpu.name, engine=label, engine_version=exp.engine_version,
                runs=exp.runs, checkpoint_scheme=d.checkpoint_scheme if d else None,
                effective_scheme=d.effective_scheme if d else None,
                kernel=d.kernel if d else None, mma=d.mma if d else None)
    failing = next((x for x in exp.decisions if not x.runs), None)
    note = f"{failing.layer_class}: {failing.error}" if failing is not None and failing.error else ""
    try:
        eng = load_engine_memory(exp.engine, exp.engine_version)
        plan = make_plan(checkpoint, exp, gpu, gpus=count, workload=workload, overrides=overrides or Overrides(),
                         calibration=calibration, kv_decisions=kv_decisions or None, engine_memory=eng)
    except (AdvisorError, ValueError, ArithmeticError) as err:
        why = f"no prediction: {err}"
        return Cell(**base, decode_tok_s=None, prefill_tok_s=None, max_context={}, fits=None,
                    kv_cache_dtype=None, note="; ".join(x for x in (note, why) if x))
    rec, p = plan.recommendation, plan.predictions
    pool = plan.derivations["kv_pool_bytes"].value
    kv = eng.kv_dtype(rec.kv_cache_dtype)
    lay = layout(checkpoint.arch, rec.tp)
    contexts = {}
    for b in CONTEXT_BATCHES:
        c = lay.max_context(kv, max(pool, 0.0), b) if kv is not None else 0.0
        contexts[b] = int(c) if c != float("inf") else int(checkpoint.arch.max_position_embeddings or 0)
    fits = pool > 0 and contexts[1] > 0
    if not fits:
        note = "; ".join(x for x in (note, "weights and reserves exceed the memory share: no KV pool") if x)
    speed = exp.runs and fits
    return Cell(**base, decode_tok_s=p.decode_tok_s if speed else None,
                prefill_tok_s=p.prefill_tok_s if speed else None, max_context=contexts if fits else {},
                fits=fits, kv_cache_dtype=rec.kv_cache_dtype, note=note)


# ---------------------------------------------------------------- presentation
MATRIX_COLUMNS = ("GPU", "engine", "runs", "effective scheme", "kernel", "MMA", "decode tok/s", "prefill tok/s",
                  "max ctx @1", "max ctx @4", "fits", "note")


def _ctx(n: int | None) -> str:
    if n is None:
        return "N/A"
    return f"{n / 1024:.0f}k" if n >= 10240 else str(n)


def matrix_rows(m: Matrix) -> tuple[tuple[str, ...], ...]:
    rows = []
    for c in m.cells:
        rows.append((c.gpu_name, c.engine + (f" {c.engine_version}" if c.engine_version else ""),
                     "yes" if c.runs else "no", na(c.effective_scheme), na(c.kernel), na(c.mma),
                     na(c.decode_tok_s, fmt="{:.1f}"), na(c.prefill_tok_s, fmt="{:,.0f}"),
                     _ctx(c.max_context.get(1)), _ctx(c.max_context.get(4)),
                     "N/A" if c.fits is None else "yes" if c.fits else "no", c.note))
    return tuple(rows)


def _style(c: Cell) -> str:
    if not c.runs or c.fits is False:
        return "bad"
    if c.checkpoint_scheme and c.effective_scheme and c.checkpoint_scheme != c.effective_scheme:
        return "warn"      # e.g. W4A4 declared, W4A16 runs: the FP4 tensor-core ceiling is not there
    return "normal"


def matrix_blocks(m: Matrix) -> tuple[Block, ...]:
    """The comparison table and the heat-map of single-stream decode speed (GPU x engine)."""
    gpus = m.gpu_ids
    names = {c.gpu_id: c.gpu_name for c in m.cells}
    values = tuple(tuple((c.decode_tok_s if c is not None else None)
                         for c in (m.cell(g, e) for e in m.engines)) for g in gpus)
    count = f"{m.gpus} x " if m.gpus > 1 else ""
    return (
        Table(MATRIX_COLUMNS, matrix_rows(m),
              title=f"Compatibility: {m.checkpoint_label} on {count}each GPU, workload {m.workload}",
              row_styles=tuple(_style(c) for c in m.cells)),
        Heatmap("Predicted single-stream decode", tuple(names[g] for g in gpus), m.engines, values,
                unit="tok/s; ✗ = does not run or does not fit"),
    )
