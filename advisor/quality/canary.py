"""Speculative acceptance as a canary: the same draft proposing to a quantized target and to its
reference is accepted less often when the quantized target's logits drift (a mis-scaled group, a
GEMM reading the wrong scale layout). A drop beyond noise is a finding.

Noise: with draft counts (vLLM's /metrics counters), a one-sided two-proportion z-test per
position: z = (a_ref - a_cand) / sqrt(p (1 - p) (1/n_ref + 1/n_cand)) with the pooled p; a drop is
significant at z > 3 (about 1 false alarm in 700 per position) and at least 2 points. Log lines
(the engines' own running windows, launchers/spec_log.py) carry no sample size: there a drop of
the mean accepted length by more than 10 % is reported, and said to be without a noise estimate.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

Z_LIMIT = 3.0
MIN_DROP = 0.02
LOG_DROP = 0.10
SUSPECT = "suspect the quantized GEMM path or its scale layout (check `quality` and the agreement above)"


@dataclass(frozen=True)
class AcceptanceSample:
    per_position: tuple[float, ...]     # unconditional: accepted at position i / drafts
    mean_length: float                  # tokens per verify step, the bonus token included
    drafts: float | None                # verify steps counted (None: a log line without counts)
    source: str


@dataclass(frozen=True)
class PositionDelta:
    position: int                       # 1-based
    reference: float
    candidate: float
    z: float | None
    significant: bool


@dataclass(frozen=True)
class CanaryResult:
    reference: AcceptanceSample
    candidate: AcceptanceSample
    positions: tuple[PositionDelta, ...]
    finding: str | None
    method: str


def compare_acceptance(candidate: AcceptanceSample, reference: AcceptanceSample) -> CanaryResult:
    rows = []
    counted = bool(candidate.drafts and reference.drafts)
    for i, (r, c) in enumerate(zip(reference.per_position, candidate.per_position)):
        z = None
        sig = False
        if counted:
            n1, n2 = reference.drafts or 0.0, candidate.drafts or 0.0     # both > 0 when counted
            p = (r * n1 + c * n2) / (n1 + n2)
            se = math.sqrt(p * (1 - p) * (1 / n1 + 1 / n2)) if 0 < p < 1 else 0.0
            z = (r - c) / se if se > 0 else (math.inf if r > c else 0.0)
            sig = z > Z_LIMIT and r - c >= MIN_DROP
        rows.append(PositionDelta(i + 1, r, c, z, sig))
    finding = None
    if counted:
        method = (f"two-proportion z-test per position over {reference.drafts:.0f} and {candidate.drafts:.0f} "
                  f"drafts; significant at z > {Z_LIMIT:g} and a drop of at least {MIN_DROP:.0%}")
        bad = [d for d in rows if d.significant]
        if bad:
            d = max(bad, key=lambda x: x.z or 0.0)      # a significant drop has its z
            finding = (f"draft acceptance at position {d.position} fell from {d.reference:.0%} (reference) to "
                       f"{d.candidate:.0%} (candidate), z = {d.z:.1f}: {SUSPECT}")
    else:
        method = (f"no sample sizes (log lines): a drop of the mean accepted length by more than {LOG_DROP:.0%} is "
                  "reported, without a noise estimate")
        if reference.mean_length > 0 and candidate.mean_length < reference.mean_length * (1 - LOG_DROP):
            finding = (f"mean accepted length fell from {reference.mean_length:.2f} (reference) to "
                       f"{candidate.mean_length:.2f} (candidate) tokens per step: {SUSPECT}")
    return CanaryResult(reference, candidate, tuple(rows), finding, method)


def from_metrics(spec) -> AcceptanceSample | None:
    """launchers.server_metrics.SpecAcceptance (vLLM /metrics deltas) -> a sample with counts."""
    if spec is None:
        return None
    return AcceptanceSample(tuple(spec.per_position), spec.mean_accepted_length, spec.drafts, spec.source)


def from_log(logged) -> AcceptanceSample | None:
    """launchers.spec_log.LoggedAcceptance -> a sample without counts."""
    if logged is None:
        return None
    return AcceptanceSample(tuple(logged.per_position), logged.mean_length, None, f"{logged.engine} log: "
                                                                                    f"{logged.source}")
