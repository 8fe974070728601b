"""Output agreement between a candidate server and a reference server (greedy decoding of the same
prompts), with sample sizes and uncertainty. Pure: the runner is launchers/agreement.py.

Per prompt (reference tokens r_0..r_{n-1}, candidate tokens c_0..):
- agreement        = #{i < n : c_i == r_i} / n  (positions, so a late divergence costs little)
- first divergence = the first i with c_i != r_i (or where one output ends); none if identical
- top-k KL         = mean over positions 0..first divergence (both saw the same context there) of
                     KL(reference || candidate) on the reference's top-k tokens plus one bucket for
                     the rest of the mass; a token missing from the candidate's top-k is given the
                     candidate's smallest listed probability (an upper bound of its probability, so
                     the KL is, if anything, underestimated). Identical distributions give exactly 0.
Per prompt kind: pooled agreement with a 95 % interval (the wider of a percentile bootstrap over
prompts, which respects that tokens of one prompt are not independent, and a Wilson interval over
tokens, which stays honest when every prompt agrees fully); the share of identical outputs with a
Wilson interval over prompts; mean KL with a bootstrap interval over prompts.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from statistics import median

BOOTSTRAP_RESAMPLES = 2000
Z95 = 1.959963984540054


@dataclass(frozen=True)
class Generation:
    text: str
    tokens: tuple[str, ...]
    token_source: str                                   # logprobs | chunks
    top: tuple[tuple[tuple[str, float], ...], ...] = ()  # per token: (token, logprob) of the top-k
    finish_reason: str | None = None
    error: str | None = None


@dataclass(frozen=True)
class Interval:
    low: float
    high: float
    method: str


@dataclass(frozen=True)
class PromptComparison:
    kind: str
    prompt: str
    reference_tokens: int
    candidate_tokens: int
    matched: int
    first_divergence: int | None
    kl: tuple[float, ...] = ()                          # per position up to the first divergence
    reference_text: str = ""
    candidate_text: str = ""

    @property
    def identical(self) -> bool:
        return self.first_divergence is None

    @property
    def agreement(self) -> float:
        return self.matched / self.reference_tokens if self.reference_tokens else 1.0

    @property
    def mean_kl(self) -> float | None:
        return sum(self.kl) / len(self.kl) if self.kl else None


@dataclass(frozen=True)
class KindAgreement:
    kind: str
    prompts: int
    tokens: int
    agreement: float
    agreement_ci: Interval
    identical: int
    identical_ci: Interval
    median_first_divergence: float | None   # over prompts that diverge
    mean_kl: float | None
    kl_ci: Interval | None
    kl_positions: int


@dataclass(frozen=True)
class AgreementReport:
    candidate_url: str
    reference_url: str
    candidate_model: str
    reference_model: str
    max_tokens: int
    prompt_source: str
    token_basis: str                       # "logprob tokens" | "stream chunks"
    kinds: tuple[KindAgreement, ...]       # one per kind, then "all"
    prompts: tuple[PromptComparison, ...]
    kl_note: str | None = None             # why KL is missing, when it is
    canary: object | None = None           # advisor.quality.canary.CanaryResult
    failures: tuple[str, ...] = ()
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def overall(self) -> KindAgreement | None:
        return next((k for k in self.kinds if k.kind == "all"), None)


# ------------------------------------------------------------------ per prompt

def kl_topk(ref: tuple[tuple[str, float], ...], cand: tuple[tuple[str, float], ...]) -> float | None:
    if not ref or not cand:
        return None
    q_list = {t: math.exp(lp) for t, lp in cand}
    q_floor = min(q_list.values())
    kl = 0.0
    p_sum = q_sum = 0.0
    for t, lp in ref:
        p = math.exp(lp)
        q = q_list.get(t, q_floor)
        if p > 0:
            kl += p * (lp - math.log(q))
        p_sum += p
        q_sum += q
    p_rest, q_rest = max(0.0, 1.0 - p_sum), max(1e-12, 1.0 - q_sum)
    if p_rest > 1e-12:
        kl += p_rest * math.log(p_rest / q_rest)
    return max(0.0, kl)


def compare_generations(kind: str, prompt: str, ref: Generation, cand: Generation) -> PromptComparison:
    use_logprobs = ref.token_source == cand.token_source == "logprobs"
    r = ref.tokens
    c = cand.tokens
    matched = sum(1 for i, t in enumerate(r) if i < len(c) and c[i] == t)
    first = None
    for i in range(max(len(r), len(c))):
        if i >= len(r) or i >= len(c) or r[i] != c[i]:
            first = i
            break
    kl: list[float] = []
    if use_logprobs and ref.top and cand.top:
        last = len(r) - 1 if first is None else first
        for i in range(min(last + 1, len(ref.top), len(cand.top))):
            k = kl_topk(ref.top[i], cand.top[i])
            if k is not None:
                kl.append(k)
    return PromptComparison(kind, prompt, len(r), len(c), matched, first, tuple(kl), ref.text, cand.text)


# ------------------------------------------------------------------ intervals

def wilson(k: int, n: int, z: float = Z95) -> Interval:
    if n <= 0:
        return Interval(0.0, 1.0, "no data")
    p = k / n
    den = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / den
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    low = 0.0 if k == 0 else max(0.0, centre - half)
    high = 1.0 if k == n else min(1.0, centre + half)
    return Interval(low, high, f"Wilson, n={n}")


def _percentile(sorted_vals: list[float], q: float) -> float:
    idx = min(len(sorted_vals) - 1, max(0, int(round(q * (len(sorted_vals) - 1)))))
    return sorted_vals[idx]


def bootstrap(items: list, stat, resamples: int = BOOTSTRAP_RESAMPLES, seed: int = 0) -> Interval:
    """Percentile bootstrap of stat(sample) over `items` (resampled with replacement); deterministic."""
    if len(items) < 2:
        v = stat(items) if items else float("nan")
        return Interval(v, v, f"single sample (n={len(items)}): no spread")
    rng = random.Random(seed)
    vals = sorted(stat([items[rng.randrange(len(items))] for _ in items]) for _ in range(resamples))
    return Interval(_percentile(vals, 0.025), _percentile(vals, 0.975), f"bootstrap over {len(items)} prompts")


def _pooled(cs: list[PromptComparison]) -> float:
    n = sum(c.reference_tokens for c in cs)
    return sum(c.matched for c in cs) / n if n else 1.0


def _mean_kl(cs: list[PromptComparison]) -> float:
    """Mean over prompts of each prompt's mean KL; every prompt given here has KL values."""
    return sum(sum(c.kl) / len(c.kl) for c in cs) / len(cs)


def kind_agreement(kind: str, cs: list[PromptComparison]) -> KindAgreement:
    tokens = sum(c.reference_tokens for c in cs)
    matched = sum(c.matched for c in cs)
    boot = bootstrap(cs, _pooled)
    wil = wilson(matched, tokens)
    ci = Interval(min(boot.low, wil.low), max(boot.high, wil.high), f"{boot.method} and {wil.method} tokens")
    identical = sum(1 for c in cs if c.identical)
    divs = [c.first_divergence for c in cs if c.first_divergence is not None]
    with_kl = [c for c in cs if c.kl]
    mean_kl: float | None = None
    kl_ci: Interval | None = None
    if with_kl:
        mean_kl = _mean_kl(with_kl)
        kl_ci = bootstrap(with_kl, _mean_kl)
    return KindAgreement(kind, len(cs), tokens, _pooled(cs), ci, identical, wilson(identical, len(cs)),
                         float(median(divs)) if divs else None, mean_kl, kl_ci, sum(len(c.kl) for c in with_kl))


def summarize(comparisons: list[PromptComparison]) -> tuple[KindAgreement, ...]:
    kinds: dict[str, list[PromptComparison]] = {}
    for c in comparisons:
        kinds.setdefault(c.kind, []).append(c)
    out = [kind_agreement(k, v) for k, v in kinds.items()]
    if comparisons:
        out.append(kind_agreement("all", comparisons))
    return tuple(out)
