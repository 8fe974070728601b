"""Module groups charged what the card's measured evidence says (advisor.cost.measured: operator tables
of the card or its nearest measured system, scaled to this card): a dense GEMM group at its merged call's
shape, the routed experts as the measured MoE layer. None where the evidence has no table for the
kernel: the roofline estimate (advisor.cost.roofline) applies then."""

from __future__ import annotations

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
    fl = 2.0 * rows * (p.params / max(p.count, 1)) / max(tp, 1) * p.count
    label = "; ".join(x for x in (got.source, got.scaling, got.note) if x)
    return PartCost(p, rows, r, "native", 1, weight_bytes, 0.0, fl, t_b, t_c, 0.0, 0.0,
                    (e, f"measured: {label}"), f"measured: {label}", (got.fixed_s or 0.0) * share, label, share)


def moe_dims(arch: ArchInfo, weights: WeightModel) -> tuple[int, int] | None:
    """(hidden, expert intermediate size) of the routed experts."""
    moe = arch.moe
    if moe is None:
        return None
    hidden = arch.hidden_size
    inter = moe.expert_intermediate_size
    if not inter:
        inter = next((p.shape[1] for p in weights.parts if p.kind == "expert" and p.shape
                      and p.shape[0] == hidden), None)
    return (hidden, int(inter)) if hidden and inter else None


def moe(ops: Ops | None, arch: ArchInfo, weights: WeightModel, p: Part, tokens: float, tp: int, r: KernelRange,
        weight_bytes: float, elements: float, *, moe_layers: int, extra_kernels_per_layer: float,
        clock_factor: float) -> PartCost | None:
    """The routed experts of every MoE layer charged the measured MoE op (top-k, permute, grouped GEMMs,
    combine) for ``tokens`` tokens: its per-layer fixed cost once (shared out by weight share over the
    expert groups) and its work by this group's share; None without evidence for the format."""
    info, dims = arch.moe, moe_dims(arch, weights)
    if ops is None or not ops.measured or info is None or dims is None or r.dequant == "cpu":
        return None

    def layer_time(dtype: str | None) -> Measured:
        return measured.moe_layer_time(ops.evidence.gpu, p.kernel_class, max(tokens, 1.0), dims[0], dims[1],
                                       info.top_k, info.num_experts, tp=tp, dtype=dtype, engine=ops.engine,
                                       kernel=measured.moe_kernel(r.kernel), evidence=ops.evidence,
                                       weight_bytes=p.stored_bytes / p.params if p.params > 0 else None)

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
    label = "; ".join(x for x in (got.source, got.scaling, got.note) if x)
    calls = layers * (3 + extra_kernels_per_layer)
    fl = 2.0 * elements * weights.expert_rows(tokens)
    return PartCost(p, weights.rows(p, tokens), r, efficiency.family(r.mma, r.dequant), 1, weight_bytes, 0.0,
                    fl, t_b, t_c, 0.0, 0.0, (e, f"measured MoE layer: {label}"), f"measured MoE layer: {label}",
                    (got.fixed_s or 0.0) * layers, label, calls)
