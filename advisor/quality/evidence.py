"""Which quality evidence exists for each weight format of a checkpoint, from the JSON documents
`quality --json` (weight error) and `bench --json --reference-url` (output agreement, acceptance
canary) wrote. `plan` and `report` take them with --quality FILE; without any, every format says
"not measured" and how to measure it. Pure: the commands read the files.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from advisor.checkpoint.model import Scheme
from advisor.doc import Doc, Paragraph, Table
from advisor.errors import BadInput

HOW_WEIGHTS = "not measured: nvfp4-advisor quality BF16_ORIGINAL CHECKPOINT"
HOW_OUTPUTS = "not measured: nvfp4-advisor bench --url SERVER --reference-url BF16_SERVER"


@dataclass(frozen=True)
class WeightEvidence:
    candidate: str
    status: str                          # ok | degraded | broken
    line: str
    by_family: dict[str, tuple[int, float, float]]   # family -> (tensors, median SNR dB, median dB vs RTN)
    source: str


@dataclass(frozen=True)
class OutputEvidence:
    candidate: str                       # server and model
    agreement: float
    low: float
    high: float
    prompts: int
    tokens: int
    mean_kl: float | None
    canary: str | None                   # finding, "within noise", or None (no acceptance counters)
    source: str


@dataclass(frozen=True)
class FormatEvidence:
    family: str                          # NVFP4 | FP8 | INT4 | MXFP4 | INT8 | BF16 ...
    share: float                         # byte share among quantized linear weights
    weights: str
    outputs: str
    canary: str


def parse(doc: dict, source: str) -> tuple[list[WeightEvidence], list[OutputEvidence]]:
    """Evidence in one JSON document; BadInput (naming `source`) when it holds none."""
    weights, outputs = [], []
    kind = doc.get("kind")
    if kind == "quality":
        try:
            fams: dict[str, list[dict]] = {}
            for t in doc["tensors"]:
                fams.setdefault(str(t["family"]), []).append(t)
            by = {f: (len(ts), _median([t["snr_db"] for t in ts], float("inf")),
                      _median([t["excess_db"] for t in ts], 0.0)) for f, ts in fams.items()}
            weights.append(WeightEvidence(str(doc["candidate"]), str(doc["verdict"]["status"]),
                                          str(doc["verdict"]["line"]), by, source))
        except (KeyError, TypeError, ValueError) as err:
            raise BadInput(f"not a complete `quality --json` document (missing {err})", path=source) from None
    elif kind == "bench" and isinstance(doc.get("agreement"), dict):
        ag = doc["agreement"]
        try:
            allk = next(k for k in ag["kinds"] if k["kind"] == "all")
            canary = ag.get("canary")
            text = None
            if isinstance(canary, dict):
                text = canary.get("finding") or "acceptance matches the reference within noise"
            outputs.append(OutputEvidence(f"{ag['candidate_url']} ({ag['candidate_model']})", float(allk["agreement"]),
                                          float(allk["agreement_ci"]["low"]), float(allk["agreement_ci"]["high"]),
                                          int(allk["prompts"]), int(allk["tokens"]),
                                          None if allk.get("mean_kl") is None else float(allk["mean_kl"]),
                                          text, source))
        except (KeyError, TypeError, ValueError, StopIteration) as err:
            raise BadInput(f"not a complete `bench --json` agreement document ({err!r})", path=source) from None
    else:
        raise BadInput("holds no quality evidence: expected `quality --json` or `bench --reference-url --json` output",
                       path=source)
    return weights, outputs


def _median(values: list, empty: float) -> float:
    """Median of the finite values (JSON has no inf: an identical tensor's SNR arrives as null)."""
    vals = [float(v) for v in values if v is not None]
    if not vals:
        return empty
    from statistics import median       # imported here: statistics pulls in decimal and fractions on plan's cold path

    return median(vals)


def family_of(scheme: str) -> str:
    """Checkpoint scheme label (W4A4-NVFP4, W8A16-FP8, BF16) -> the weight format family."""
    return scheme.rsplit("-", 1)[-1].upper() if "-" in scheme else scheme.upper()


def per_format(scheme_shares: Mapping[Scheme, float], weights: list[WeightEvidence],
               outputs: list[OutputEvidence]) -> tuple[FormatEvidence, ...]:
    shares: dict[str, float] = {}
    for scheme, share in scheme_shares.items():
        shares[family_of(scheme)] = shares.get(family_of(scheme), 0.0) + share
    for w in weights:                        # formats measured but not in the classification still show
        for fam in w.by_family:
            shares.setdefault(fam, 0.0)
    rows = []
    for fam, share in sorted(shares.items(), key=lambda x: -x[1]):
        measured = [w for w in weights if fam in w.by_family]
        if measured:
            w = measured[0]
            n, snr, excess = w.by_family[fam]
            weight_text = (f"{w.status.upper()}: median SNR {snr:.1f} dB over {n} tensor(s), {excess:+.2f} dB vs "
                           f"round-to-nearest ({w.source})")
        else:
            weight_text = HOW_WEIGHTS
        if outputs:
            o = outputs[0]
            kl = "" if o.mean_kl is None else f", mean top-k KL {o.mean_kl:.3g}"
            out_text = (f"{o.agreement:.1%} greedy agreement (95 % {o.low:.1%}-{o.high:.1%}, {o.prompts} prompts, "
                        f"{o.tokens} tokens{kl}; whole model, {o.source})")
            canary = o.canary or "no acceptance counters on both servers"
        else:
            out_text, canary = HOW_OUTPUTS, "not measured (needs speculative decoding on both servers)"
        rows.append(FormatEvidence(fam, share, weight_text, out_text, canary))
    return tuple(rows)


def evidence_doc(rows: tuple[FormatEvidence, ...]) -> Doc:
    if not rows:
        return Doc()
    measured = any(not r.weights.startswith("not measured") or not r.outputs.startswith("not measured") for r in rows)
    return Doc((
        Table(("format", "share of quantized weights", "weight error", "output agreement", "acceptance canary"),
              tuple((r.family, f"{r.share:.0%}", r.weights, r.outputs, r.canary) for r in rows),
              title="Quality evidence per format"),
        Paragraph("Speed is half of the choice between formats; whether the quantized model still answers like the "
                  "original is the other half." + ("" if measured else
                                                   " Nothing was measured for this checkpoint yet (pass the JSON of "
                                                   "`quality` / `bench --reference-url` with --quality FILE)."), "dim"),
    ))


def load_files(paths: list[str]) -> tuple[list[WeightEvidence], list[OutputEvidence]]:
    from advisor.jsonout import read_json_object

    weights: list[WeightEvidence] = []
    outputs: list[OutputEvidence] = []
    for p in paths:
        w, o = parse(read_json_object(p), p)
        weights += w
        outputs += o
    return weights, outputs
