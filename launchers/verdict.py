"""Verdict: the measured speed against the plan's predicted band, and when it falls short, the
likely causes ranked by the evidence the run collected (kernel check, watchdog telemetry)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from advisor.errors import BadInput

DEFAULT_BAND = 0.15   # a bare number in a prediction file means +-15 %


@dataclass(frozen=True)
class Band:
    low: float
    high: float


@dataclass(frozen=True)
class Prediction:
    decode_tps: Band | None              # single-stream decode tokens/s
    aggregate_tps: Band | None           # all streams together at `concurrency`
    concurrency: int | None
    kv_tokens: int | None
    source: str
    aggregate_table: tuple[tuple[int, float], ...] = ()   # plan: (batch, tok/s) pairs
    what_if: str | None = None           # plan: its GPU selection when it was a what-if (not this box's cards)


@dataclass(frozen=True)
class Cause:
    kind: str                            # misdispatch | cpu_fallback | power_clock | thermal | other_processes | other
    text: str
    evidence: str                        # what was seen; "not checked: ..." when it could not be tested
    checked: bool


@dataclass(frozen=True)
class Verdict:
    metric: str
    status: str                          # within | below | above | no_prediction | no_measurement
    measured: float | None
    band: Band | None
    ratio: float | None                  # measured / middle of the band
    causes: tuple[Cause, ...] = ()


def _band(v) -> Band | None:
    if v is None:
        return None
    if isinstance(v, (int, float)):
        return Band(v * (1 - DEFAULT_BAND), v * (1 + DEFAULT_BAND))
    if isinstance(v, dict) and "low" in v and "high" in v:
        return Band(float(v["low"]), float(v["high"]))
    if isinstance(v, (list, tuple)) and len(v) == 2:
        return Band(float(v[0]), float(v[1]))
    raise ValueError(f"cannot read a band from {v!r}")


def _find(doc, key):
    if isinstance(doc, dict):
        if key in doc:
            return doc[key]
        for v in doc.values():
            hit = _find(v, key)
            if hit is not None:
                return hit
    elif isinstance(doc, list):
        for v in doc:
            hit = _find(v, key)
            if hit is not None:
                return hit
    return None


def load_prediction(path: str | Path) -> Prediction:
    """Read a plan JSON (`plan --json`) or a small prediction file. Keys, found at any depth:
    decode_tokens_per_s (number or {low, high}), aggregate_tokens_per_s, concurrency, kv_cache_tokens."""
    p = Path(path)
    from advisor.textfile import read_text

    try:
        doc = json.loads(read_text(p, what="plan file"))
    except (ValueError, RecursionError) as err:
        raise BadInput(f"not JSON: {err}", path=str(p)) from None
    try:
        if isinstance(doc, dict) and isinstance(doc.get("predictions"), dict) and "decode_tok_s" in doc["predictions"]:
            return prediction_from_plan(doc, str(p))
        dec = _band(_find(doc, "decode_tokens_per_s"))
        agg = _band(_find(doc, "aggregate_tokens_per_s"))
        conc = _find(doc, "concurrency")
        kv = _find(doc, "kv_cache_tokens")
    except (ValueError, TypeError, AttributeError) as err:
        raise BadInput(str(err), path=str(p)) from None
    if dec is None and agg is None:
        raise BadInput("no decode_tokens_per_s or aggregate_tokens_per_s prediction in the file", path=str(p))
    return Prediction(dec, agg, int(conc) if isinstance(conc, (int, float)) else None,
                      int(kv) if isinstance(kv, (int, float)) else None, str(p))


def prediction_from_plan(doc: dict, source: str = "plan") -> Prediction:
    """A `plan --json` document: predictions.decode_tok_s, decode_aggregate_tok_s {batch: tok/s},
    kv_pool_tokens {kv dtype: tokens} for recommendation.kv_cache_dtype."""
    from launchers.settings import predicted_kv_tokens

    preds = doc["predictions"]
    dec = _band(preds.get("decode_tok_s"))
    agg_table = {int(k): v for k, v in (preds.get("decode_aggregate_tok_s") or {}).items() if v is not None}
    conc = max(agg_table) if agg_table else None
    agg = _band(agg_table[conc]) if conc and conc > 1 else None
    gpu_doc = doc.get("gpu")
    gpu = gpu_doc if isinstance(gpu_doc, dict) else {}
    selection = str(gpu.get("selection") or "")
    return Prediction(dec, agg, conc if agg else None, predicted_kv_tokens(doc), source,
                      tuple(sorted(agg_table.items())), selection if selection.startswith("what-if") else None)


_from_plan = prediction_from_plan   # the name advisor/tui/actions.py calls (ask: switch to the public one)


def aggregate_for(prediction: Prediction, concurrency: int) -> Band | None:
    """The predicted aggregate band at exactly ``concurrency`` streams (None when not predicted)."""
    table = dict(prediction.aggregate_table)
    if concurrency in table:
        return _band(table[concurrency])
    return prediction.aggregate_tps if prediction.concurrency == concurrency else None


def judge(metric: str, measured: float | None, band: Band | None, *, kernel_check=None,
          watch_findings=None, what_if: str | None = None) -> Verdict:
    if band is None:
        return Verdict(metric, "no_prediction", measured, None, None)
    if measured is None:
        return Verdict(metric, "no_measurement", None, band, None)
    mid = (band.low + band.high) / 2
    ratio = measured / mid if mid else None
    if measured > band.high:
        return Verdict(metric, "above", measured, band, ratio)
    if measured >= band.low:
        return Verdict(metric, "within", measured, band, ratio)
    return Verdict(metric, "below", measured, band, ratio, rank_causes(kernel_check, watch_findings, what_if))


def rank_causes(kernel_check=None, watch_findings=None, what_if: str | None = None) -> tuple[Cause, ...]:
    found, unchecked = [], []
    if what_if:   # the band belongs to other cards: nothing else explains the gap as surely
        found.append(Cause("other", "the plan predicts a GPU that is not serving here (a what-if plan)",
                           f"{what_if}; re-run `plan --gpu auto` on this machine", True))
    if kernel_check is None:
        unchecked.append(Cause("misdispatch", "a slower kernel than predicted runs",
                               "not checked: start the server with `nvfp4-advisor launch` to compare kernels", False))
    elif kernel_check.mismatches:
        ev = "; ".join(f"{r.layer_class}: predicted {r.predicted}, engine logged {', '.join(r.observed)}"
                       for r in kernel_check.mismatches)
        found.append(Cause("misdispatch", "the engine dispatched other kernels than predicted", ev, True))
    else:
        unchecked.append(Cause("misdispatch", "a slower kernel than predicted runs",
                               "kernel check found no mismatch (layer classes the engine did not log are "
                               "unverified)", True))
    watched = watch_findings is not None
    by_kind = {f.kind: f for f in (watch_findings or ())}
    telemetry = watched and "no_gpu_telemetry" not in by_kind
    why = "no GPU telemetry (NVML) during the run" if watched else "the server's processes were not watched"
    texts = {
        "cpu_fallback": "work runs on the CPU instead of the GPU",
        "power_clock": "the GPU runs below its clock (power limit / clock cap)",
        "thermal": "the GPU throttles for temperature",
        "other_processes": "other processes share the GPU",
    }
    for kind, text in texts.items():
        if kind in by_kind:
            found.append(Cause(kind, by_kind[kind].text, by_kind[kind].evidence, True))
        elif telemetry:
            unchecked.append(Cause(kind, text, "not seen in the watchdog samples", True))
        else:
            unchecked.append(Cause(kind, text, f"not checked: {why}", False))
    unchecked.sort(key=lambda c: not c.checked)
    other = Cause("other", "the prediction is optimistic for this setup (engine overhead, scheduler, sampling)",
                  "compare a W4A16 and a BF16 run on the same GPU to calibrate", False)
    return tuple(found + [c for c in unchecked if not c.checked] + [c for c in unchecked if c.checked] + [other])
