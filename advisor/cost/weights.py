"""What one decode step reads and computes, per part of the checkpoint, at its stored width.

Built from the checkpoint's module groups and the kernel path `explain` chose for each layer
class, so an NVFP4 W4A4 checkpoint on an Ampere card is costed as the W4A16 Marlin path that
really runs there (packed values + scales read, BF16 MMA).
"""

from __future__ import annotations

from dataclasses import dataclass

from advisor.checkpoint.model import CheckpointInfo
from advisor.cost.efficiency import KERNEL_CLASS
from advisor.kernel_path.model import Explanation, LayerDecision

ROLE_CLASS = {
    "expert": "moe_experts", "lm_head": "lm_head_embed", "embed": "lm_head_embed",
}
# Read in decode? vision towers run only on image prompts, the MTP head only when drafting.
_NOT_IN_DECODE = ("vision", "mtp")


@dataclass(frozen=True)
class Part:
    """One kind of weight with one kernel path (aggregated over module groups)."""

    kind: str             # dense | expert | lm_head | embed | mtp | vision
    layer_class: str
    scheme: str           # effective scheme (what runs)
    kernel_class: str     # efficiency class (advisor.cost.efficiency.KERNEL_CLASS)
    mma: str
    dequant: str          # none | registers | memory | cpu
    stored_bytes: float   # whole checkpoint, all members
    params: float         # logical weight elements


@dataclass(frozen=True)
class WeightModel:
    parts: tuple[Part, ...]
    num_experts: int
    top_k: int
    hidden: int
    vocab: int

    def experts_fraction(self, batch: float) -> float:
        """Expected share of routed experts B tokens touch: 1-(1-k/E)^B (uniform routing)."""
        if self.num_experts <= 0:
            return 1.0
        p = min(1.0, self.top_k / self.num_experts)
        return 1.0 - (1.0 - p) ** max(batch, 0.0)

    def _read_fraction(self, part: Part, batch: float) -> float:
        if part.kind == "expert":
            return self.experts_fraction(batch)
        if part.kind == "embed":      # a lookup reads only the rows of the batch's tokens
            return min(1.0, batch / self.vocab) if self.vocab else 0.0
        if part.kind in _NOT_IN_DECODE:
            return 0.0
        return 1.0

    def step_bytes(self, batch: float, tp: int = 1) -> dict[Part, float]:
        """Bytes read per decode step of ``batch`` sequences, per part, per GPU."""
        return {p: p.stored_bytes * self._read_fraction(p, batch) / tp for p in self.parts}

    def step_elements(self, batch: float, tp: int = 1) -> dict[Part, float]:
        """Weight elements read (and dequantized) per decode step, per part, per GPU."""
        return {p: p.params * self._read_fraction(p, batch) / tp for p in self.parts}

    def flops_per_token(self, tp: int = 1) -> dict[Part, float]:
        """2 x multiply-adds per token: experts count top_k of E; embeddings are lookups."""
        out = {}
        for p in self.parts:
            if p.kind == "expert":
                share = self.top_k / self.num_experts if self.num_experts else 1.0
            elif p.kind in ("embed",) + _NOT_IN_DECODE:
                share = 0.0
            else:
                share = 1.0
            out[p] = 2.0 * p.params * share / tp
        return out

    def resident_bytes(self, tp: int = 1) -> float:
        """Bytes that live in VRAM (everything loaded, vision tower and MTP included)."""
        return sum(p.stored_bytes for p in self.parts) / tp

    def bytes_of(self, kind: str) -> float:
        return sum(p.stored_bytes for p in self.parts if p.kind == kind)

    def params_of(self, kind: str) -> float:
        return sum(p.params for p in self.parts if p.kind == kind)


def decision_for(explanation: Explanation, role: str, layer_class: str) -> LayerDecision | None:
    by_role = [d for d in explanation.decisions if role in d.roles]
    if by_role:
        return by_role[0]
    by_class = [d for d in explanation.decisions if d.layer_class == layer_class]
    return by_class[0] if by_class else None


def _kind(role: str) -> str:
    if role in ("expert", "embed", "lm_head", "mtp", "vision"):
        return role
    return "dense"


def build(checkpoint: CheckpointInfo, explanation: Explanation) -> WeightModel:
    arch = checkpoint.arch
    acc: dict[tuple, list[float]] = {}
    modules = checkpoint.modules
    for m in modules:
        layer_class = ROLE_CLASS.get(m.role, "dense_linear")
        d = decision_for(explanation, m.role, layer_class)
        scheme = d.effective_scheme if d is not None else m.scheme
        if m.role in ("embed", "lm_head", "vision", "mtp", "norm", "conv") and m.scheme in ("BF16", "FP16"):
            scheme = m.scheme          # kept 16-bit parts run as stored whatever the class decision says
        mma = d.mma if d is not None else ("hmma_bf16" if scheme != "FP16" else "hmma_f16")
        dequant = d.dequant if d is not None else "none"
        if KERNEL_CLASS.get(scheme, "bf16") == "bf16":
            dequant = "none"
            if mma not in ("hmma_bf16", "hmma_f16", "wgmma_bf16", "tcgen05_bf16"):
                mma = "hmma_bf16"
        key = (_kind(m.role), layer_class, scheme, KERNEL_CLASS.get(scheme, "bf16"), mma, dequant)
        slot = acc.setdefault(key, [0.0, 0.0])
        slot[0] += m.stored_bytes
        slot[1] += m.params
    roles = {m.role for m in modules}
    if "lm_head" not in roles and arch.vocab_size and arch.hidden_size:
        # Tied (or undeclared) head: the output projection reads the embedding matrix in full.
        emb = [m for m in modules if m.role == "embed"]
        nbytes = sum(m.stored_bytes for m in emb) or arch.vocab_size * arch.hidden_size * 2
        key = ("lm_head", "lm_head_embed", "BF16", "bf16", "hmma_bf16", "none")
        acc[key] = [float(nbytes), float(arch.vocab_size * arch.hidden_size)]
    if not modules:
        t = checkpoint.totals
        d = decision_for(explanation, "mlp_down", "dense_linear")
        scheme = d.effective_scheme if d is not None else checkpoint.label
        acc[("dense", "dense_linear", scheme, KERNEL_CLASS.get(scheme, "bf16"),
             d.mma if d else "hmma_bf16", d.dequant if d else "none")] = [
            float(t.bytes_per_token or t.stored_bytes), float(t.active_params or t.params)]
    parts = tuple(Part(k[0], k[1], k[2], k[3], k[4], k[5], v[0], v[1]) for k, v in acc.items())
    moe = arch.moe
    return WeightModel(parts, moe.num_experts if moe else 0, moe.top_k if moe else 0,
                       arch.hidden_size, arch.vocab_size)
