"""What one forward pass reads and computes, per module group of the checkpoint, at its stored width.

Each module group is costed with the decision `explain` made for that module (looked up by name:
two groups of one role can run different kernels, e.g. FastLLM's 48-wide GDN in_proj_a/b on a
CUDA-core GEMV next to in_proj_qkv on Marlin), and with the kernel that decision runs at the number
of rows M of the call (decode batch, speculative verification width, prefill chunk).
"""

from __future__ import annotations

from dataclasses import dataclass

from advisor.checkpoint.model import ActQuant, CheckpointInfo, ModuleGroup, WeightQuant
from advisor.cost.efficiency import KERNEL_CLASS
from advisor.kernel_path.model import Dequant, Explanation, KernelRange, LayerDecision, MmaClass

ROLE_CLASS = {
    "expert": "moe_experts", "lm_head": "lm_head_embed", "embed": "lm_head_embed",
}
# Read in decode? vision towers run only on image prompts, the MTP head only when drafting.
_NOT_IN_DECODE = ("vision", "mtp")
# Module groups that are no GEMM (explain gives them no kernel): read once per step, no FLOPs.
_NOT_GEMM = ("norm", "conv")
_SIXTEEN = ("hmma_bf16", "hmma_f16", "wgmma_bf16", "tcgen05_bf16")
# Roles whose module groups the engine loads into one merged linear and runs as one GEMM per layer.
FUSED_ROLES = ("attn_qkv", "mlp_gate_up", "gdn_in_proj", "shared_expert")
FUSED_SOURCE = ("vllm/model_executor/layers/linear.py:686 (MergedColumnParallelLinear), 1011 (QKVParallelLinear)"
                "@0.33.0; models/llama.py:95,165@0.33.0 (gate_up_proj, qkv_proj)")
# Roles split along K under tensor parallelism (row-parallel: o_proj, down_proj); the others split N.
ROW_PARALLEL_ROLES = ("attn_o", "mlp_down", "gdn_out_proj")
# Module groups every tensor-parallel rank holds whole (ReplicatedLinear): bytes, FLOPs and shape unsplit.
# LatentMoE's projections into and out of the experts' latent width (Nemotron-3 Super).
REPLICATED_NAMES = ("fc1_latent_proj", "fc2_latent_proj")
REPLICATED_SOURCE = ("vllm/model_executor/models/nemotron_h.py:197-213@0.33.0, "
                     "sglang/srt/models/nemotron_h.py:326-339@0.5.23 (ReplicatedLinear)")
# The MoE router gate, whole on every rank too: vLLM's GateLinear is a ReplicatedLinear
# (vllm/model_executor/layers/fused_moe/router/gate_linear.py:22@0.33.0; models/qwen3_moe.py:170,
# nemotron_h.py:159, minimax_m2.py:110, qwen3_next.py:191, gpt_oss.py:382@0.33.0), SGLang's a ReplicatedLinear
# (sglang/srt/models/qwen3_moe.py:290, nemotron_h.py:265, minimax_m2.py:556@0.5.23; gpt_oss.py:135,257
# TinyGemmLinear(ReplicatedLinear)@0.5.23).
REPLICATED_ROLES = ("router",)
ROUTER_SOURCE = ("vllm/model_executor/layers/fused_moe/router/gate_linear.py:22@0.33.0 "
                 "(GateLinear(ReplicatedLinear)), sglang/srt/models/qwen3_moe.py:290@0.5.23 (ReplicatedLinear)")


@dataclass(frozen=True)
class Part:
    """One module group (or the tied head) with the kernel path it runs."""

    kind: str             # dense | expert | lm_head | embed | mtp | vision | other
    layer_class: str
    scheme: str           # effective scheme (what runs)
    kernel_class: str     # format class (advisor.cost.efficiency.KERNEL_CLASS)
    mma: MmaClass         # the decision's MMA (its kernel at every M unless ``ranges`` says otherwise)
    dequant: Dequant      # none | registers | memory | cpu
    stored_bytes: float   # whole checkpoint, all members
    params: float         # logical weight elements
    name: str = ""        # the module group (pattern) it costs
    ranges: tuple[KernelRange, ...] = ()   # the kernel per band of rows M (empty: mma/dequant at every M)
    count: int = 1        # members (layers x experts): GEMM calls per forward
    gemm: bool = True     # False: norms, conv weights (read, no GEMM)
    role: str = ""        # checkpoint role (attn_qkv, mlp_down, ...): which groups one engine call fuses
    shape: tuple[int, int] | None = None   # logical (N out, K in) of one member, whole model (no TP split)
    granularity: str = ""  # weight scale granularity (block: block-scaled FP8)

    def at_m(self, m: float) -> KernelRange:
        """The kernel this group runs for M rows."""
        m = max(m, 1)
        for r in self.ranges:
            if r.covers(m):
                return r
        return KernelRange(1, None, "", self.mma, self.dequant)

    @property
    def mma_classes(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys((self.mma,) + tuple(r.mma for r in self.ranges)))

    @property
    def member_bytes(self) -> float:
        return self.stored_bytes / max(self.count, 1)

    @property
    def replicated(self) -> bool:
        """Every tensor-parallel rank holds and runs the whole group (REPLICATED_NAMES, REPLICATED_ROLES)."""
        return self.name.endswith(REPLICATED_NAMES) or self.role in REPLICATED_ROLES

    def ranks(self, tp: int) -> int:
        """The ranks this group's weights are split over under ``tp``-way tensor parallelism."""
        return 1 if self.replicated else max(tp, 1)


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

    def expert_rows(self, m: float) -> float:
        """Expected rows each touched expert multiplies when M tokens are routed."""
        touched = self.num_experts * self.experts_fraction(m)
        return m * self.top_k / max(touched, 1e-9)

    def rows(self, part: Part, m: float) -> float:
        """Rows M of one GEMM call of ``part`` when the forward carries ``m`` tokens."""
        if part.kind == "expert" and self.num_experts:
            return self.expert_rows(m)
        return m

    def _read_fraction(self, part: Part, batch: float) -> float:
        if part.kind == "expert":
            return self.experts_fraction(batch)
        if part.kind == "embed":      # a lookup reads only the rows of the batch's tokens
            return min(1.0, batch / self.vocab) if self.vocab else 0.0
        if part.kind in _NOT_IN_DECODE:
            return 0.0
        return 1.0

    def step_bytes(self, batch: float, tp: int = 1) -> dict[Part, float]:
        """Bytes stored for what a decode step of ``batch`` sequences reads, per part, per GPU (one pass)."""
        return {p: p.stored_bytes * self._read_fraction(p, batch) / p.ranks(tp) for p in self.parts}

    def step_elements(self, batch: float, tp: int = 1) -> dict[Part, float]:
        """Weight elements read (and dequantized) per decode step, per part, per GPU."""
        return {p: p.params * self._read_fraction(p, batch) / p.ranks(tp) for p in self.parts}

    def flops_per_token(self, tp: int = 1) -> dict[Part, float]:
        """2 x multiply-adds per token: experts count top_k of E; embeddings and non-GEMM weights none."""
        out = {}
        for p in self.parts:
            if p.kind == "expert":
                share = self.top_k / self.num_experts if self.num_experts else 1.0
            elif p.kind in ("embed",) + _NOT_IN_DECODE or not p.gemm:
                share = 0.0
            else:
                share = 1.0
            out[p] = 2.0 * p.params * share / p.ranks(tp)
        return out

    def resident_bytes(self, tp: int = 1) -> float:
        """Bytes that live in VRAM (everything loaded, vision tower and MTP included)."""
        whole = sum(p.stored_bytes for p in self.parts if p.replicated)      # every rank holds these
        return sum(p.stored_bytes for p in self.parts if not p.replicated) / tp + whole

    def replicated_source(self) -> str:
        """The engine lines that make this checkpoint's replicated groups whole on every rank."""
        cites = ([REPLICATED_SOURCE] if any(p.name.endswith(REPLICATED_NAMES) for p in self.parts) else []) + (
            [f"router gate: {ROUTER_SOURCE}"] if any(p.role in REPLICATED_ROLES for p in self.parts) else [])
        return "; ".join(cites)

    def fused_call(self, part: Part) -> tuple[int, int, float] | None:
        """(N, K, share) of the one GEMM the engine runs per layer for ``part``: the groups of a merged role
        (FUSED_ROLES) with the same input size, member count and format are one call; ``share`` is this
        group's part of its weights. None: the group has no known shape."""
        if part.shape is None:
            return None
        n, k = part.shape
        if part.role not in FUSED_ROLES:
            return n, k, 1.0
        mates = [p for p in self.parts if p.role == part.role and p.shape is not None and p.shape[1] == k
                 and p.count == part.count and p.kernel_class == part.kernel_class and p.kind == part.kind]
        total = sum(p.params for p in mates)
        return sum(p.shape[0] for p in mates if p.shape is not None), k, (part.params / total if total > 0 else 1.0)

    def bytes_of(self, kind: str) -> float:
        return sum(p.stored_bytes for p in self.parts if p.kind == kind)

    def params_of(self, kind: str) -> float:
        return sum(p.params for p in self.parts if p.kind == kind)


def decision_for(explanation: Explanation, module: ModuleGroup) -> LayerDecision | None:
    """The decision that covers ``module``: by name; explanations whose decisions name no modules (built
    by hand) fall back to the first decision of the module's role, then of its layer class."""
    named = [d for d in explanation.decisions if d.modules]
    if named:
        # one name can stand for two groups (the excluded layers of a pattern stay BF16): match the scheme too
        covering = [d for d in named if d.covers_module(module.name)]
        return next((d for d in covering if d.checkpoint_scheme == module.scheme), covering[0] if covering else None)
    by_role = [d for d in explanation.decisions if module.role in d.roles]
    if by_role:
        return by_role[0]
    layer_class = ROLE_CLASS.get(module.role, "dense_linear")
    return next((d for d in explanation.decisions if d.layer_class == layer_class), None)


def _kind(role: str) -> str:
    if role in ("expert", "embed", "lm_head", "mtp", "vision"):
        return role
    return "dense"


def _part(m: ModuleGroup, d: LayerDecision | None, *, name: str | None = None, kind: str | None = None,
          stored: float | None = None, params: float | None = None) -> Part:
    layer_class = ROLE_CLASS.get(m.role, "dense_linear")
    scheme = d.effective_scheme if d is not None and d.runs else m.scheme
    if m.role in ("embed", "lm_head", "vision", "mtp", "norm", "conv") and m.scheme in ("BF16", "FP16"):
        scheme = m.scheme          # kept 16-bit parts run as stored whatever the class decision says
    cls = KERNEL_CLASS.get(scheme, "bf16")
    mma = d.mma if d is not None and d.runs else ("hmma_bf16" if scheme != "FP16" else "hmma_f16")
    dequant = d.dequant if d is not None and d.runs else "none"
    ranges = d.m_ranges if d is not None and d.runs else ()
    if cls == "bf16" and dequant != "cpu":
        # a 16-bit weight has nothing to convert: whatever the class decision, it multiplies as stored
        dequant = "none"
        mma = mma if mma in _SIXTEEN else "hmma_bf16"
        ranges = tuple(r.__class__(r.m_min, r.m_max, r.kernel, r.mma if r.mma in _SIXTEEN else mma, "none",
                                   r.source, r.note) for r in ranges
                       ) if d is not None and d.covers_module(m.name) else ()
    gemm = m.role not in _NOT_GEMM and (m.shape is not None or m.role in ("expert", "lm_head"))
    return Part(kind or _kind(m.role), layer_class, scheme, cls, mma, dequant,
                float(m.stored_bytes if stored is None else stored), float(m.params if params is None else params),
                name or m.name, ranges, max(m.count, 1), gemm, m.role, m.shape, m.weight.granularity)


def build(checkpoint: CheckpointInfo, explanation: Explanation) -> WeightModel:
    arch = checkpoint.arch
    parts: list[Part] = []
    modules = checkpoint.modules
    for m in modules:
        parts.append(_part(m, decision_for(explanation, m)))
    roles = {m.role for m in modules}
    if "lm_head" not in roles and arch.vocab_size and arch.hidden_size:
        # Tied (or undeclared) head: the output projection reads the embedding matrix in full.
        emb = [m for m in modules if m.role == "embed"]
        nbytes = sum(m.stored_bytes for m in emb) or arch.vocab_size * arch.hidden_size * 2
        head = ModuleGroup(name="lm_head", role="lm_head", scheme="BF16", weight=WeightQuant(), act=ActQuant(),
                           shape=(arch.vocab_size, arch.hidden_size))
        d = decision_for(explanation, head)
        part = _part(head, d, stored=float(nbytes), params=float(arch.vocab_size * arch.hidden_size))
        mma = part.mma if part.mma in _SIXTEEN else "hmma_bf16"
        parts.append(Part(part.kind, part.layer_class, "BF16", "bf16", mma, "none", part.stored_bytes, part.params,
                          "lm_head (tied to the embedding)", part.ranges, 1, role="lm_head", shape=head.shape))
    if not modules:
        t = checkpoint.totals
        d = next((d for d in explanation.decisions if d.layer_class == "dense_linear"), None)
        scheme = d.effective_scheme if d is not None else checkpoint.label
        parts.append(Part("dense", "dense_linear", scheme, KERNEL_CLASS.get(scheme, "bf16"),
                          d.mma if d else "hmma_bf16", d.dequant if d else "none",
                          float(t.bytes_per_token or t.stored_bytes), float(t.active_params or t.params),
                          "(all weights)", d.m_ranges if d else (), 1))
    moe = arch.moe
    return WeightModel(tuple(parts), moe.num_experts if moe else 0, moe.top_k if moe else 0,
                       arch.hidden_size, arch.vocab_size)

