"""Module groups charged what the card's measured evidence says (advisor.cost.measured: operator tables
of the card or its nearest measured system, scaled to this card): a dense GEMM group at its merged call's
shape, the routed experts as the measured MoE layer. None where the evidence has no table for the
kernel: the roofline estimate (advisor.cost.roofline) applies then."""

from __future__ import annotations

from dataclasses import dataclass

from advisor.checkpoint.model import ArchInfo
from advisor.cost import efficiency, measured
from advisor.cost.measured import Measured, Ops
from advisor.cost.step_costs import PartCost
from advisor.cost.weights import ROW_PARALLEL_ROLES, Part, WeightModel
from advisor.kernel_path.model import KernelRange


def call_share(weights: WeightModel, p: Part) -> float:
    """GEMM calls per forward charged to ``p``: one merged call per member (layer), split by weight share."""
    call = weights.fused_call(p)
    return p.count * (call[2] if call else 1.0)


def gemm_shape(weights: WeightModel, p: Part, tp: int) -> tuple[int, int, float] | None:
    """(N, K, share) of the merged call ``p`` belongs to, on one GPU (row-parallel roles split K)."""
    call = weights.fused_call(p)
    if call is None:
        return None
    n, k, share = call
    if p.replicated:
        return n, k, share
    if p.role in ROW_PARALLEL_ROLES:
        return n, max(1, k // max(tp, 1)), share
    return max(1, n // max(tp, 1)), k, share


def _gemm_call(ops: Ops | None, weights: WeightModel, p: Part, rows: float, tp: int, kernel_class: str,
               dtype: str | None) -> Measured | None:
    # dense layers and the head: the MTP head's and vision tower's per-expert groups are not one call each
    if ops is None or not ops.measured or not p.gemm or p.kind not in ("dense", "lm_head") or dtype is None:
        return None
    shape = gemm_shape(weights, p, tp)
    if shape is None:
        return None
    n, k, _ = shape
    got = measured.gemm_time(ops.evidence.gpu, kernel_class, max(rows, 1.0), n, k, dtype=dtype, engine=ops.engine,
                             evidence=ops.evidence)
    return got if got.seconds is not None else None


def gemm_bf16(ops: Ops | None, weights: WeightModel, p: Part, rows: float, tp: int) -> Measured | None:
    """The measured 16-bit GEMM of ``p``'s shape at M rows (its floor and efficiency stand in for a
    weight-only kernel's), or None."""
    return _gemm_call(ops, weights, p, rows, tp, "bf16", "bfloat16")


def gemm(ops: Ops | None, weights: WeightModel, p: Part, rows: float, r: KernelRange, tp: int, weight_bytes: float,
         clock_factor: float) -> PartCost | None:
    """A dense GEMM group charged its measured time: floor + roofline / e at M rows and the merged
    call's N*K, scaled to this card; None when the card's evidence has no table for its format."""
    dtype = measured.gemm_dtype(p.kernel_class, p.scheme, p.granularity, r.kernel)
    got = _gemm_call(ops, weights, p, rows, tp, p.kernel_class, dtype)
    if ops is None or got is None:
        return None
    share = call_share(weights, p)
    e = got.efficiency or 1.0
    # to the plan's DRAM figure (--bandwidth, microbench), unless microbench timed this very kernel class
    scale = 1.0 if got.source.startswith("microbench") else ops.bandwidth_scale
    t_b = got.memory_s * scale / e * share
    t_c = got.compute_s / e * share / clock_factor
    fl = 2.0 * rows * (p.params / max(p.count, 1)) / p.ranks(tp) * p.count
    label = "; ".join(x for x in (got.source, got.scaling, got.note) if x)
    return PartCost(p, rows, r, "native", 1, weight_bytes, 0.0, fl, t_b, t_c, 0.0, 0.0,
                    (e, f"measured: {label}"), f"measured: {label}", (got.fixed_s or 0.0) * share, label, share)


@dataclass(frozen=True)
class ExpertShape:
    """The routed experts as the checkpoint stores them: the width they read and write (the hidden size, or
    a LatentMoE's latent width: Nemotron-3 Super's fc1_latent_proj maps hidden -> latent before them), the
    intermediate size, and the weight matrices per expert (3 gated: gate, up, down or a fused gate_up and
    down; 2 non-gated, e.g. Nemotron-H's ReLU^2 up and down)."""

    width: int
    inter: int
    mats: int | None          # None: the expert groups hold no shapes (the measured kernel's gating stands)
    source: str


def expert_shape(arch: ArchInfo, weights: WeightModel, moe_layers: int | None = None) -> ExpertShape | None:
    """The experts' shape from the checkpoint's expert groups (``Part.shape``: logical (N out, K in) of one
    member): the width W such that every group either reads W into the intermediate size (or twice it: a
    fused gate_up), (I or 2I, W), or writes it back, (W, I); the matrices per expert are the expert
    groups' elements over (width x intermediate) per expert of every MoE layer. Where two widths fit every
    group (MiniMax: hidden 3072 = 2 x intermediate), the hidden size. Without shapes (or no width fits):
    the config's hidden size and the config's (or first matching group's) intermediate size."""
    moe = arch.moe
    if moe is None:
        return None
    groups = [p for p in weights.parts if p.kind == "expert" and p.shape is not None and p.params > 0]
    inter = moe.expert_intermediate_size or next(
        (p.shape[1] for p in groups if p.shape is not None and p.shape[0] == arch.hidden_size), None)
    if not inter:
        return None
    shapes = {p.shape for p in groups if p.shape is not None}

    def fits(w: int) -> bool:          # every group reads w into (2 x) inter, or writes inter back to w
        return all((n in (inter, 2 * inter) and k == w) or (n == w and k == inter) for n, k in shapes)

    widths = sorted({d for s in shapes for d in s if fits(d)}, key=lambda w: w != arch.hidden_size)
    if not widths or (len(widths) > 1 and widths[0] != arch.hidden_size):
        if not arch.hidden_size:
            return None
        return ExpertShape(arch.hidden_size, int(inter), None,
                           "config hidden size; the expert groups give no width (the measured kernel's gating)")
    width = widths[0]
    layers = moe_layers or moe.moe_layers or arch.num_layers
    members = layers * moe.num_experts
    ratio = sum(p.params for p in groups) / (width * inter * members) if members else 0.0
    mats = round(ratio) if round(ratio) in (2, 3) and abs(ratio - round(ratio)) < 0.05 else None
    src = (f"checkpoint expert groups: width {width}"
           + (" (latent; hidden " + str(arch.hidden_size) + ")" if width != arch.hidden_size else "")
           + f", intermediate {inter}, "
           + (f"{mats} matrices per expert ({'gated' if mats == 3 else 'non-gated'})" if mats else
              f"{ratio:.2f} matrices per expert (not 2 or 3: the measured kernel's gating)"))
    return ExpertShape(int(width), int(inter), mats, src)


def moe(ops: Ops | None, arch: ArchInfo, weights: WeightModel, p: Part, tokens: float, tp: int, r: KernelRange,
        weight_bytes: float, elements: float, *, moe_layers: int, extra_kernels_per_layer: float,
        clock_factor: float) -> PartCost | None:
    """The routed experts of every MoE layer charged the measured MoE op (top-k, permute, grouped GEMMs,
    combine) for ``tokens`` tokens: its per-layer fixed cost once (shared out by weight share over the
    expert groups) and its work by this group's share; None without evidence for the format."""
    info, dims = arch.moe, expert_shape(arch, weights, moe_layers)
    if ops is None or not ops.measured or info is None or dims is None or r.dequant == "cpu":
        return None

    def layer_time(dtype: str | None) -> Measured:
        return measured.moe_layer_time(ops.evidence.gpu, p.kernel_class, max(tokens, 1.0), dims.width, dims.inter,
                                       info.top_k, info.num_experts, tp=tp, dtype=dtype, engine=ops.engine,
                                       kernel=measured.moe_kernel(r.kernel), evidence=ops.evidence,
                                       weight_bytes=p.stored_bytes / p.params if p.params > 0 else None,
                                       mats=dims.mats)

    got = layer_time(measured.moe_dtype(p.kernel_class, p.scheme, p.granularity))
    if got.seconds is None:          # the exact format unmeasured here: the nearest measured one of its class
        got = layer_time(None)
    if got.seconds is None:
        return None
    experts = sum(q.params for q in weights.parts if q.kind == "expert")
    share = p.params / experts if experts > 0 else 1.0
    layers = moe_layers * share
    e = got.efficiency or 1.0
    t_b = got.memory_s * ops.bandwidth_scale / e * layers
    t_c = got.compute_s / e * layers / clock_factor
    latent = dims.source if dims.width != arch.hidden_size else ""
    label = "; ".join(x for x in (got.source, got.scaling, latent, got.note) if x)
    calls = layers * (3 + extra_kernels_per_layer)
    fl = 2.0 * elements * weights.expert_rows(tokens)
    return PartCost(p, weights.rows(p, tokens), r, efficiency.family(r.mma, r.dequant), 1, weight_bytes, 0.0,
                    fl, t_b, t_c, 0.0, 0.0, (e, f"measured MoE layer: {label}"), f"measured MoE layer: {label}",
                    (got.fixed_s or 0.0) * layers, label, calls)
