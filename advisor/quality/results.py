"""What `quality` found: per tensor, per layer class, fused-scale checks and the verdict (frozen)."""

from __future__ import annotations

from dataclasses import dataclass, field

from advisor.quality.metrics import Group


@dataclass(frozen=True)
class TensorResult:
    name: str                     # the BF16 tensor name (module.weight)
    module: str
    layer_class: str              # layer and expert indices collapsed: model.layers.*.self_attn.q_proj
    role: str                     # attn_qkv, mlp_down, expert, ... (advisor.checkpoint.roles)
    format: str                   # layout label, e.g. "NVFP4 (ModelOpt)"
    family: str                   # NVFP4 | MXFP4 | FP8 | INT4 | INT8
    shape: tuple[int, ...]
    reference: str                # how it was matched: same name | split | slice | transposed
    rel_error: float
    snr_db: float
    rtn_snr_db: float             # round-to-nearest in the same format on the same weights
    cosine: float
    max_abs_error: float
    ref_amax: float
    group_size: int               # elements along K per scale group
    groups: int
    saturated_groups: int
    zero_groups: int
    nonfinite: int
    broken_groups: int
    broken: tuple[Group, ...]     # the first few, with positions
    notes: tuple[str, ...] = ()

    @property
    def excess_db(self) -> float:
        """How much worse than round-to-nearest (positive: worse)."""
        return self.rtn_snr_db - self.snr_db

    @property
    def saturated_share(self) -> float:
        return self.saturated_groups / self.groups if self.groups else 0.0

    @property
    def zero_share(self) -> float:
        return self.zero_groups / self.groups if self.groups else 0.0


@dataclass(frozen=True)
class ClassResult:
    layer_class: str
    family: str
    tensors: int
    median_snr_db: float
    min_snr_db: float
    median_excess_db: float
    max_rel_error: float
    worst: str


@dataclass(frozen=True)
class ScaleGroupCheck:
    """Members of a fused group (read the same input; one GEMM in the engine) and their global scales."""

    rule: str                     # e.g. "attention q/k/v"
    members: tuple[str, ...]
    scales: tuple[float, ...]     # weight_scale_2 (amax/2688) per member
    shared: bool
    served_snr_db: tuple[float, ...] = ()   # each member's SNR under the scale the engine applies
    source: str = ""


@dataclass(frozen=True)
class Finding:
    severity: str                 # broken | degraded | note
    text: str


@dataclass(frozen=True)
class Verdict:
    status: str                   # ok | degraded | broken
    line: str                     # the one-line verdict
    thresholds: tuple[tuple[str, str], ...]   # (threshold, why)


@dataclass(frozen=True)
class QualityReport:
    reference: str
    candidate: str
    formats: tuple[str, ...]
    tensors: tuple[TensorResult, ...]
    classes: tuple[ClassResult, ...]
    scale_groups: tuple[ScaleGroupCheck, ...]
    kept: dict                    # {"identical": n, "different": [...], "missing": [...]}
    findings: tuple[Finding, ...]
    verdict: Verdict
    notes: tuple[str, ...] = field(default_factory=tuple)
    seconds: float = 0.0

    def worst(self, n: int = 10) -> tuple[TensorResult, ...]:
        return tuple(sorted(self.tensors, key=lambda t: (-t.broken_groups, -t.excess_db, t.snr_db))[:n])
