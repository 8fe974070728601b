"""Speculative decoding: expected accepted tokens per step from per-position acceptance, the draft
cost, and verification of k+1 positions in one weight read -> speedup per k.

E[tokens/step](k) = 1 + sum_{j=1..k} prod_{i=1..j} a_i        (a_i: acceptance of position i
                                                               given positions < i were accepted;
                                                               engines print u_i = a_1...a_i)
t(k)  = t_verify(B, k+1 positions) + draft passes x t_draft_pass
speedup(k) = E(k) x t_step(B) / t(k)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from advisor.cost.derived import Derived


@dataclass(frozen=True)
class SpecMethod:
    name: str
    first: float          # acceptance of the first draft position
    decay: float          # a_i = first x decay^(i-1)
    passes: str           # "k": one draft forward per token (autoregressive) | "1": one block pass | "0"
    draft: str            # mtp_head | layers (a separate draft of draft_layers decoder layers) | draft_model | none
    source: str
    draft_layers: int = 0             # decoder layers of a separate draft ("layers")
    draft_source: str = ""

    def acceptance(self, k: int) -> tuple[float, ...]:
        return tuple(min(1.0, self.first * self.decay ** i) for i in range(k))


METHODS = {
    "mtp": SpecMethod("mtp", 0.85, 0.90, "k", "mtp_head",
                      "DeepSeek-V3 report §5.4.3: 2nd-token acceptance 85-90 %; decay for chained MTP "
                      "positions is an estimate"),
    "eagle": SpecMethod("eagle", 0.75, 0.90, "k", "layers",
                        "estimate from EAGLE (Li et al. 2024) chain acceptance ~0.7-0.8 on MT-bench",
                        1, "EAGLE drafts with one decoder layer (Li et al. 2024)"),
    "eagle3": SpecMethod("eagle3", 0.80, 0.92, "k", "layers",
                         "estimate from EAGLE-3 (Li et al. 2025): higher acceptance than EAGLE",
                         1, "EAGLE-3 drafts with one decoder layer (Li et al. 2025)"),
    "dflash": SpecMethod("dflash", 0.80, 0.90, "1", "layers",
                         "estimate: block drafter, one parallel pass for all k positions",
                         5, "estimate: z-lab's DFlash drafters for the Qwen3.5/3.6 27B targets have 5 decoder layers "
                            "(published GGUF of z-lab/Qwen3.6-27B-DFlash: layer pattern S,S,S,S,F, Q8_0 1.75 GB, "
                            "https://llmsreview.com/models/spiritbuun--qwen3.6-27b-dflash-gguf)"),
    "ngram": SpecMethod("ngram", 0.50, 0.80, "0", "none",
                        "estimate: prompt-lookup hits depend on the text (high for edits/code, low for prose)"),
    "draft_model": SpecMethod("draft_model", 0.70, 0.95, "k", "draft_model",
                              "estimate: small same-family draft model"),
}
DRAFT_MODEL_SHARE = (0.10, "estimate: draft model ~10 % of the target's bytes (override --draft-bytes)")
K_RANGE = range(1, 9)


def curve(method: SpecMethod, measured: tuple[float, ...], k: int) -> tuple[float, ...]:
    """Per-position acceptance for k drafts: measured values first, then the last one decayed at the
    method's rate (or the method default when nothing was measured)."""
    if not measured:
        return method.acceptance(k)
    out = list(measured[:k])
    while len(out) < k:
        out.append(out[-1] * method.decay)
    return tuple(out)


ACCEPTANCE_KINDS = ("unconditional", "conditional")


def to_conditional(rates: tuple[float, ...], kind: str) -> tuple[float, ...]:
    """Per-position acceptance as the model uses it: a_i = P(position i accepted | positions < i were).

    Engines print the unconditional share u_i of verification steps in which position i was accepted
    (vLLM's Per-position acceptance rate, FastLLM's pos_accept_rate); since a position is accepted only
    after every earlier one, u_i = a_1 x ... x a_i, so a_i = u_i / u_(i-1)."""
    if kind == "conditional":
        return tuple(rates)
    if kind != "unconditional":
        raise ValueError(f"acceptance kind must be one of {', '.join(ACCEPTANCE_KINDS)} (got {kind!r})")
    out, prev = [], 1.0
    for u in rates:
        out.append(min(1.0, u / prev) if prev > 0 else 0.0)
        prev = u
    return tuple(out)


def from_mean_length(length: float, k: int) -> tuple[float, ...]:
    """A constant conditional rate a whose expected tokens per step 1 + a + ... + a^k equal ``length``
    (SGLang prints only the mean accepted length); solved by bisection."""
    if k <= 0 or length <= 1.0:
        return (0.0,) * max(k, 0)
    if length >= k + 1:
        return (1.0,) * k
    lo, hi = 0.0, 1.0
    for _ in range(60):
        a = (lo + hi) / 2
        if expected_tokens((a,) * k) < length:
            lo = a
        else:
            hi = a
    return ((lo + hi) / 2,) * k


def expected_tokens(acceptance: tuple[float, ...]) -> float:
    total, run = 1.0, 1.0
    for a in acceptance:
        run *= a
        total += run
    return total


@dataclass(frozen=True)
class SpecPoint:
    k: int
    expected_tokens: float
    step_seconds: float
    speedup: float
    derived: Derived


def evaluate(method: SpecMethod, k: int, acceptance: tuple[float, ...], t_base: float,
             t_verify: float, t_draft_pass: float) -> SpecPoint:
    e = expected_tokens(acceptance[:k])
    passes = {"k": k, "1": 1, "0": 0}[method.passes]
    t = t_verify + passes * t_draft_pass
    speedup = e * t_base / t if t > 0 else 0.0
    return SpecPoint(k, e, t, speedup, Derived(
        speedup, "x", "E(k) x t_step / (t_verify(k+1) + passes x t_draft)",
        {"k": k, "E(k)": e, "acceptance": ",".join(f"{a:.3g}" for a in acceptance[:k]),
         "t_step": t_base, "t_verify": t_verify, "passes": passes, "t_draft": t_draft_pass},
        method.source))


class Gain(Protocol):
    """A draft count and what it gains over plain decoding (SpecPoint, spec_concurrency.SpecStep)."""

    @property
    def k(self) -> int: ...

    @property
    def speedup(self) -> float: ...


def choose(points: Sequence[Gain], min_gain: float = 1.05, tolerance: float = 0.01) -> int:
    """The smallest k within ``tolerance`` of the best speedup (more drafts past the plateau only add
    risk); 0 when no k beats plain decoding by ``min_gain``."""
    best = max((p.speedup for p in points), default=0.0)
    if best < min_gain:
        return 0
    return min(p.k for p in points if p.speedup >= best * (1 - tolerance))
