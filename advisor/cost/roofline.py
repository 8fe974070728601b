"""Decode-step and prefill time of the kernel path that runs: bytes over bandwidth versus FLOPs
over the MMA that path issues, plus the dequant issue term and the fixed per-step costs.

decode step (B sequences, context C), per GPU under TP N:
  t_bytes   = sum_parts bytes_read(B)/N / (DRAM x eff_class) + B x KV(C)/N / (DRAM x eff_kv)
              + B x recurrent state/N x (1 load + 1 store per position) / (DRAM x eff_kv)   (GDN/Mamba)
  t_compute = sum_parts FLOPs(B)/N / MMA_rate + dequant_instr / issue_rate + attention FLOPs / rate
  t_gpu     = max(t_bytes, t_compute)
  t_step    = t_gpu + kernels x graph_gap + host           (CUDA graphs)
            = max(t_gpu + kernels x graph_gap, kernels x eager_launch) + host
                                                           (eager: the CPU launches run ahead)
            + layers x all-reduces x t_allreduce(B x H x 2 B)   (TP)
dequant_instr = weight elements x instr/element x ceil(M / m_tile) / 32 (warp instructions), of whose
issue time (1 - overlap) adds to the MMA time; issue_rate = SMs x 4 schedulers x clock.

Each module group is costed with the kernel its explained decision runs at the M of the call
(decode: batch x verified positions; experts: the rows each touched expert sees; prefill: the chunk):
  a CUDA-core GEMV (mma none) multiplies at the CUDA-core FMA rate, and re-reads its weights once per
  launch when the engine splits the rows into several launches (unless one member fits in L2);
  a dequantize-to-memory kernel (dequant memory) adds the FP16 copy it writes and the GEMM reads back
  (4 B/element), only at the M where the engine takes that path;
  t_gpu += (1 - load_compute_overlap) x min(t_bytes, t_compute) of the group (no cp.async on Turing,
  separate dequant and GEMM kernels), per kernel family and architecture (advisor.cost.efficiency).
A rate the GPU table lacks (peak or clock null) is never taken as infinite: its term is left out and
named in ``unknown``, so the time is a lower bound and the plan reports the speed as N/A.

Where the card has measured evidence (advisor.cost.measured: NVIDIA AIConfigurator's operator tables,
the card itself or its nearest measured system, scaled to its bandwidth, peaks and clock), the
operators are charged what was measured instead of the estimates above, each kernel in turn:
  dense GEMM (one merged call per layer: qkv, gate_up)  floor(M) + max(bytes/BW, FLOPs/peak) / e(M, N*K)
  weight-only (Marlin: no dense measurement)    streaming as above (field-notes §3), its 16-bit MMA at the
                                                measured BF16 efficiency, the BF16 call floor standing in
  MoE layer (routing, permute, grouped GEMMs, combine)   fixed(T) + roofline / e(T)
  decode attention per layer                    floor + KV bytes / (BW e)
  prefill attention per layer and chunk         floor + FLOPs / (peak e)
  all-reduce                                    the measured curve at M x hidden x 2 bytes and TP
  t_step = sum of kernel times + unmeasured kernels x gap + all-reduces, with the host time per step
           overlapped where the engine schedules the next step while the GPU runs (vLLM async scheduling,
           SGLang's overlap scheduler), added where it does not.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from advisor.checkpoint.model import ArchInfo
from advisor.cost.derived import Derived
from advisor.cost import efficiency, measured
from advisor.cost.efficiency import KV_DEQUANT_INSTR, THREADS_PER_WARP, WEIGHT_ONLY, Efficiencies, padded_rows
from advisor.cost.interconnect import Link
from advisor.cost import recurrent_state
from advisor.cost.kv import KvDtype, KvLayout, layout
from advisor.cost.weights import ROW_PARALLEL_ROLES, Part, WeightModel
from advisor.kernel_path.model import KernelRange

# Attention MMA classes that consume FP8 KV natively (no unpack before the MMA).
_FP8_NATIVE_ATTN = ("qmma_e4m3", "wgmma_e4m3", "tcgen05_e4m3")


@dataclass(frozen=True)
class PartCost:
    """One module group at one M: the kernel that runs and what it costs, per GPU."""

    part: Part
    rows: float                # M of one call (experts: rows per touched expert)
    kernel: KernelRange
    family: str                # efficiency.family
    launches: int              # weight passes (GEMV launches that re-read the weights)
    weight_bytes: float        # weights read, all passes
    copy_bytes: float          # FP16 copy written and read back (dequant to memory)
    flops: float
    t_bytes: float
    t_compute: float           # MMA or CUDA-core time + dequant issue
    t_dequant: float
    t_exposed: float           # the share of min(t_bytes, t_compute) that does not overlap
    bandwidth_eff: tuple[float, str]
    compute_source: str
    t_floor: float = 0.0       # measured fixed cost of the calls (GEMM floor, MoE routing/permute)
    measured: str = ""         # the measured table behind the time, and how it was carried to this card
    calls: float = 0.0         # kernels the measurement covers (their launch gaps are in it)

    @property
    def seconds(self) -> float:
        return max(self.t_bytes, self.t_compute) + self.t_exposed + self.t_floor

    def to_json(self) -> dict:
        k = self.kernel
        return {"module": self.part.name, "kind": self.part.kind, "gemm": self.part.gemm and self.part.kind != "embed",
                "kernel": self.kernel_label, "rows_M": _r(self.rows),
                "kernel_rows": k.label, "mma": k.mma, "dequant": k.dequant, "family": self.family,
                "threshold_source": k.source, "launches": self.launches, "weight_bytes": _r(self.weight_bytes),
                "read_bytes_per_element": k.read_bytes_per_element,
                "copy_bytes": _r(self.copy_bytes), "flops": _r(self.flops), "t_bytes": _r(self.t_bytes),
                "t_compute": _r(self.t_compute), "t_dequant": _r(self.t_dequant), "t_exposed": _r(self.t_exposed),
                "t_floor": _r(self.t_floor), "seconds": _r(self.seconds),
                "bandwidth_eff": self.bandwidth_eff[0], "bandwidth_eff_source": self.bandwidth_eff[1],
                "compute_source": self.compute_source,
                "measured_source": self.measured or "none: estimate (see bandwidth_eff_source, compute_source)"}


    @property
    def kernel_label(self) -> str:
        if self.part.kind == "embed":
            return "row gather (embedding lookup)"
        if not self.part.gemm:
            return "no GEMM (weights read once per step)"
        return self.kernel.kernel or "(as explained)"


def _r(v: float) -> float:
    return float(f"{v:.6g}")


@dataclass(frozen=True)
class StepCost:
    seconds: float
    t_bytes: float
    t_compute: float
    t_fixed: float
    bound: str                 # bandwidth | compute | overhead
    bytes_read: float          # per GPU
    flops: float               # per GPU
    derived: Derived
    unknown: tuple[str, ...] = ()   # rates the table lacks: seconds is then a lower bound
    parts: tuple[PartCost, ...] = ()   # per module group: the kernel at this M and its terms
    t_exposed: float = 0.0     # load/compute time that does not overlap (added to max(t_bytes, t_compute))
    t_host: float = 0.0        # the engine's host time per step (scheduler, sampler), part of t_fixed
    sources: tuple[str, ...] = ()      # the measured tables behind the step's terms


@dataclass(frozen=True)
class PrefillCost:
    seconds: float
    tok_s: float
    t_bytes: float
    t_compute: float
    t_dequant: float
    t_fixed: float
    chunks: int
    derived: Derived
    unknown: tuple[str, ...] = ()   # rates the table lacks: seconds is then a lower bound
    parts: tuple[PartCost, ...] = ()   # per module group, for a full chunk
    t_exposed: float = 0.0
    sources: tuple[str, ...] = ()


@dataclass(frozen=True)
class Attention:
    """One step's attention over every KV layer: measured per layer, or the bytes/FLOPs estimate."""

    t_bytes: float
    t_compute: float
    t_floor: float
    calls: float                # attention kernels the measurement covers
    source: str                 # the measured table ("" : estimate)

    @property
    def seconds(self) -> float:
        return max(self.t_bytes, self.t_compute) + self.t_floor


@dataclass(frozen=True)
class CostModel:
    weights: WeightModel
    arch: ArchInfo
    eff: Efficiencies
    attn_mma: str
    clock_factor: float         # <1 under a power limit (compute and issue rate only)
    overhead: dict              # engine step_overhead
    allreduce_per_layer: int
    link: Link
    bandwidth_gbs: float        # DRAM denominator (table, calibration or override)
    state_rules: dict = field(default_factory=dict)   # engine recurrent_state rules (GDN/Mamba state)
    model_dtype: str = "bfloat16"                      # activations / 'auto' caches: float16 without BF16
    swa_full_tokens_ratio: float | None = None         # engine splits its pool full/window (SGLang)
    ops: measured.Ops | None = None                    # measured operator evidence for this card and engine
    # decode_step's module-group terms per (M, tp, extra): fresh per instance, also under replace()
    _steps: dict = field(default_factory=dict, init=False, compare=False, repr=False)

    def recurrent(self, tp: int, kv: KvDtype, draft_tokens: int = 0, cc: tuple[int, int] | None = None,
                  architecture: str = "") -> recurrent_state.RecurrentState | None:
        """The linear-attention layers' per-request state (None: the model keeps none)."""
        return recurrent_state.build(self.state_rules, self.arch, tp=tp,
                                     attn_token_bytes=self.kv_layout(tp).bytes_per_token_layer(kv),
                                     draft_tokens=draft_tokens, model_dtype=self.model_dtype, cc=cc,
                                     architecture=architecture)

    # ---------------------------------------------------------------- rates
    def _mma_rate(self, mma: str) -> float | None:
        """FLOP/s of an MMA class (its BF16/FP16 rate when the table lacks it); None: no peak known."""
        v = self.eff.mma_tflops.get(mma)
        if v is None:
            v = self.eff.mma_tflops.get("hmma_bf16") or self.eff.mma_tflops.get("hmma_f16")
        return v * 1e12 * self.clock_factor if v else None

    def _cuda_core_time(self, flops: float, unknown: set[str]) -> float:
        rate = self.eff.cuda_core_tflops
        if not rate:
            if flops > 0:
                unknown.add("CUDA-core FMA rate (GEMV)")
            return 0.0
        return flops / (rate * 1e12 * self.clock_factor)

    def _issue(self) -> float | None:
        return self.eff.issue_rate * self.clock_factor if self.eff.issue_rate > 0 else None

    def _mma_time(self, flops: float, mma: str, unknown: set[str]) -> float:
        rate = self._mma_rate(mma)
        if rate is None:
            if flops > 0:
                unknown.add(f"tensor peak for {mma}")
            return 0.0
        return flops / rate

    def _peak_time(self, flops: float, mma: str, e: float, unknown: set[str]) -> float:
        """FLOPs at the card's table peak for ``mma`` times a measured efficiency ``e``."""
        peak = self.eff.peak_tflops.get(mma) or self.eff.peak_tflops.get("hmma_bf16") \
            or self.eff.peak_tflops.get("hmma_f16")
        if not peak:
            return self._mma_time(flops, mma, unknown)
        return flops / (peak * 1e12 * max(e, 1e-3) * self.clock_factor)

    def _issue_time(self, warp_instr: float, unknown: set[str]) -> float:
        rate = self._issue()
        if rate is None:
            if warp_instr > 0:
                unknown.add("SM clock (dequant issue rate)")
            return 0.0
        return warp_instr / rate

    def _bw(self, cls: str) -> float:
        return self.bandwidth_gbs * 1e9 * self.eff.bandwidth_eff.get(cls, self.eff.bandwidth_eff["bf16"])

    def _part_eff(self, p: Part, fam: str, rows: float) -> tuple[float, str]:
        """Fraction of DRAM bandwidth this group streams at; experts go through a grouped MoE GEMM, slower
        than the dense kernel of their format."""
        v, src = efficiency.bandwidth_eff(self.eff, p.kernel_class, fam, rows)
        if p.kind == "expert" and "moe_grouped" in self.eff.bandwidth_eff and self.eff.bandwidth_eff["moe_grouped"] < v:
            return self.eff.bandwidth_eff["moe_grouped"], efficiency.MOE_BANDWIDTH_EFF[1]
        return v, src

    def _part_bw(self, p: Part) -> float:
        """DRAM bytes/s of the group's kernel at one row (decode)."""
        r = p.at_m(1)
        return self.bandwidth_gbs * 1e9 * self._part_eff(p, efficiency.family(r.mma, r.dequant), 1)[0]

    def moe_layers(self) -> int:
        moe = self.arch.moe
        return 0 if moe is None else int(moe.moe_layers or self.arch.num_layers)

    def kernels_per_step(self) -> float:
        """Kernels one forward launches: per layer, plus the MoE layers' routing and grouped GEMMs."""
        o = self.overhead
        return (self.arch.num_layers * float(o["kernels_per_layer"])
                + self.moe_layers() * float(o.get("moe_extra_kernels_per_layer", 0)))

    def kv_layout(self, tp: int, draft_layers: int = 0) -> KvLayout:
        return layout(self.arch, tp, draft_layers, self.swa_full_tokens_ratio)

    # ---------------------------------------------------------------- attention
    def _attn_dims(self, decode: bool) -> tuple[float, float, float]:
        a = self.arch
        if a.mla is not None:
            m = a.mla
            if decode:   # absorbed MLA: scores and values in the latent space
                return a.num_attention_heads, m.kv_lora_rank + m.qk_rope_head_dim, m.kv_lora_rank
            return (a.num_attention_heads, (m.qk_nope_head_dim or m.kv_lora_rank // 4) + m.qk_rope_head_dim,
                    m.v_head_dim or m.kv_lora_rank // 4)
        d = a.head_dim or a.hidden_size // max(a.num_attention_heads, 1)
        return a.num_attention_heads, d, d

    def attention_flops(self, queries_ctx_pairs_full: float, pairs_window: float, decode: bool) -> float:
        """2 x H x (d_qk + d_v) FLOPs per (query, key) pair, over full and sliding-window layers."""
        h, dqk, dv = self._attn_dims(decode)
        kvl = self.kv_layout(1)
        return 2.0 * h * (dqk + dv) * (kvl.full_layers * queries_ctx_pairs_full
                                         + kvl.window_layers * pairs_window)

    # ---------------------------------------------------------------- dequant
    def _dequant_seconds(self, part: Part, elements: float, rows: float, unknown: set[str] | None = None,
                         launches: int = 1) -> float:
        """Issue time of the weight conversion the group's kernel at ``rows`` does, less what hides behind
        its tensor cores (efficiency.dequant_cost: per kernel family and architecture)."""
        r = part.at_m(rows)
        fam = efficiency.family(r.mma, r.dequant)
        if part.kernel_class not in WEIGHT_ONLY or r.dequant in ("none", "cpu"):
            return 0.0
        dc = efficiency.dequant_cost(fam, part.kernel_class, self.eff.sm)
        passes = max(1, math.ceil(rows / dc.m_tile)) if fam == "tiled" else max(1, launches)
        return (1.0 - dc.overlap) * self._issue_time(elements * dc.instr_per_element * passes / THREADS_PER_WARP,
                                                     set() if unknown is None else unknown)

    def part_cost(self, p: Part, tokens: float, nbytes: float, elements: float, flops_token: float,
                  unknown: set[str], *, tp: int = 1, prefill: bool = False,
                  deq_cal: dict[str, float] | None = None) -> PartCost:
        """Cost of module group ``p`` in a forward over ``tokens`` tokens (per GPU): its kernel at the M of
        the call, the weight passes, the dequant copy where the engine makes one, MMA or CUDA-core time;
        measured where the card has evidence for that kernel (``measured_gemm``, ``measured_moe``)."""
        wm = self.weights
        head_once = prefill and p.kind == "lm_head"       # logits for the last prompt position only
        rows = 1.0 if head_once else wm.rows(p, tokens)
        r = p.at_m(rows)
        fam = efficiency.family(r.mma, r.dequant)
        launches = r.launches(max(1, math.ceil(rows)))
        # one member's shard within L2: a re-launch finds the weights still cached
        reread = launches if launches > 1 and p.member_bytes / max(tp, 1) > self.eff.l2_bytes else 1
        if r.read_bytes_per_element:          # the engine reads its own layout, not the checkpoint's
            nbytes = elements * r.read_bytes_per_element
        weight_bytes = nbytes * reread
        copy_bytes = elements * 4.0 if fam == "copy" else 0.0      # FP16 written, then read by the GEMM
        if p.kind == "expert":
            got = self.measured_moe(p, 1.0 if head_once else tokens, tp, r, weight_bytes, elements)
            if got is not None:
                return got
        elif nbytes > 0 and fam == "native":
            got = self.measured_gemm(p, rows, r, tp, weight_bytes)
            if got is not None:
                return got
        bw_eff = self._part_eff(p, fam, rows)
        bw = self.bandwidth_gbs * 1e9 * bw_eff[0]
        t_b = (weight_bytes + copy_bytes) / bw if bw > 0 else 0.0
        if not p.gemm:
            fl = 0.0
        elif p.kind == "expert" and wm.num_experts:
            fl = 2.0 * elements * (rows if prefill else padded_rows(r.mma, rows))
        else:
            m_eff = 1.0 if head_once else (tokens if prefill or r.mma == "none" else padded_rows(r.mma, tokens))
            fl = flops_token * m_eff
        bf16 = self.measured_gemm_bf16(p, rows, tp) if fam == "tiled" and nbytes > 0 else None
        if r.mma == "none" and r.dequant != "cpu":
            t_mma, csrc = self._cuda_core_time(fl, unknown), "CUDA-core FMA rate (assumption cuda_core_tflops)"
        elif bf16 is not None and r.mma not in self.eff.calibrated_mma:
            # the 16-bit MMA a weight-only kernel issues, at the efficiency a 16-bit GEMM of this shape reached
            t_mma = self._peak_time(fl, r.mma, bf16.efficiency or 1.0, unknown)
            csrc = (f"table peak of {r.mma} x measured BF16 GEMM efficiency {bf16.efficiency:.3g} at this M and "
                    f"N*K ({bf16.source}; {bf16.scaling})")
        else:
            t_mma, csrc = self._mma_time(fl, r.mma, unknown), f"tensor peak mma_tflops.{r.mma}"
        if deq_cal and p.kernel_class in deq_cal and p.kernel_class in WEIGHT_ONLY and fam == "tiled":
            t_deq = t_mma * max(0.0, deq_cal[p.kernel_class])     # measured on this GPU
        else:
            t_deq = self._dequant_seconds(p, elements, rows, unknown, launches)
        t_c = t_mma + t_deq
        dc = efficiency.dequant_cost(fam, p.kernel_class, self.eff.sm)
        exposed = (1.0 - dc.load_overlap) * min(t_b, t_c)
        floor, calls, src = 0.0, 0.0, ""
        if bf16 is not None:
            # Marlin's own per-call floor is unmeasured: the measured 16-bit GEMM floor stands in
            share = self._call_share(p)
            floor, calls = (bf16.fixed_s or 0.0) * share, share
            src = (f"floor: the measured BF16 GEMM floor stands in for {r.kernel or 'the weight-only kernel'} "
                   f"(no dense measurement of it) — {bf16.source}; {bf16.scaling}")
        else:
            cf = efficiency.call_floor(fam, self.eff.sm)[0] * p.count
            exposed += max(0.0, cf - max(t_b, t_c) - exposed) if nbytes > 0 else 0.0
        return PartCost(p, rows, r, fam, launches if reread > 1 else 1, weight_bytes, copy_bytes, fl, t_b, t_c,
                        t_deq, exposed, bw_eff, csrc, floor, src, calls)

    # ---------------------------------------------------------------- measured operators
    def _call_share(self, p: Part) -> float:
        """GEMM calls per forward charged to ``p``: one merged call per member (layer), split by weight share."""
        call = self.weights.fused_call(p)
        return p.count * (call[2] if call else 1.0)

    def _gemm_shape(self, p: Part, tp: int) -> tuple[int, int, float] | None:
        """(N, K, share) of the merged call ``p`` belongs to, on one GPU (row-parallel roles split K)."""
        call = self.weights.fused_call(p)
        if call is None:
            return None
        n, k, share = call
        if p.role in ROW_PARALLEL_ROLES:
            return n, max(1, k // max(tp, 1)), share
        return max(1, n // max(tp, 1)), k, share

    def _measured_call(self, p: Part, rows: float, tp: int, kernel_class: str, dtype: str | None, kernel: str = ""):
        ops = self.ops
        # dense layers and the head: the MTP head's and vision tower's per-expert groups are not one call each
        if ops is None or not ops.measured or not p.gemm or p.kind not in ("dense", "lm_head") or dtype is None:
            return None
        shape = self._gemm_shape(p, tp)
        if shape is None:
            return None
        n, k, _ = shape
        got = measured.gemm_time(ops.evidence.gpu, kernel_class, max(rows, 1.0), n, k, dtype=dtype, engine=ops.engine,
                                 evidence=ops.evidence)
        return got if got.seconds is not None else None

    def measured_gemm_bf16(self, p: Part, rows: float, tp: int):
        """The measured 16-bit GEMM of ``p``'s shape at M rows (its floor and efficiency stand in for a
        weight-only kernel's), or None."""
        return self._measured_call(p, rows, tp, "bf16", "bfloat16")

    def measured_gemm(self, p: Part, rows: float, r: KernelRange, tp: int, weight_bytes: float) -> PartCost | None:
        """A dense GEMM group charged its measured time: floor + roofline / e at M rows and the merged
        call's N*K, scaled to this card; None when the card's evidence has no table for its format."""
        dtype = measured.gemm_dtype(p.kernel_class, p.scheme, p.granularity, r.kernel)
        got = self._measured_call(p, rows, tp, p.kernel_class, dtype, r.kernel)
        if got is None:
            return None
        share = self._call_share(p)
        e = got.efficiency or 1.0
        # to the plan's DRAM figure (--bandwidth, microbench), unless microbench timed this very kernel class
        scale = 1.0 if got.source.startswith("microbench") else self.ops.bandwidth_scale
        t_b = got.memory_s * scale / e * share
        t_c = got.compute_s / e * share / self.clock_factor
        fl = 2.0 * rows * (p.params / max(p.count, 1)) / max(tp, 1) * p.count
        label = "; ".join(x for x in (got.source, got.scaling, got.note) if x)
        return PartCost(p, rows, r, "native", 1, weight_bytes, 0.0, fl, t_b, t_c, 0.0, 0.0,
                        (e, f"measured: {label}"), f"measured: {label}", (got.fixed_s or 0.0) * share, label, share)

    def _moe_dims(self) -> tuple[int, int] | None:
        """(hidden, expert intermediate size) of the routed experts."""
        moe = self.arch.moe
        if moe is None:
            return None
        hidden = self.arch.hidden_size
        inter = moe.expert_intermediate_size
        if not inter:
            inter = next((p.shape[1] for p in self.weights.parts if p.kind == "expert" and p.shape
                          and p.shape[0] == hidden), None)
        return (hidden, int(inter)) if hidden and inter else None

    def measured_moe(self, p: Part, tokens: float, tp: int, r: KernelRange, weight_bytes: float,
                     elements: float) -> PartCost | None:
        """The routed experts of every MoE layer charged the measured MoE op (top-k, permute, grouped GEMMs,
        combine) for ``tokens`` tokens: its per-layer fixed cost once (shared out by weight share over the
        expert groups) and its work by this group's share; None without evidence for the format."""
        ops, moe, dims = self.ops, self.arch.moe, self._moe_dims()
        if ops is None or not ops.measured or moe is None or dims is None or r.dequant == "cpu":
            return None
        args = (ops.evidence.gpu, p.kernel_class, max(tokens, 1.0), dims[0], dims[1], moe.top_k, moe.num_experts)
        kw = dict(tp=tp, engine=ops.engine, kernel=measured.moe_kernel(r.kernel), evidence=ops.evidence,
                  weight_bytes=p.stored_bytes / p.params if p.params > 0 else None)
        got = measured.moe_layer_time(*args, dtype=measured.moe_dtype(p.kernel_class, p.scheme, p.granularity), **kw)
        if got.seconds is None:          # the exact format unmeasured here: the nearest measured one of its class
            got = measured.moe_layer_time(*args, **kw)
        if got.seconds is None:
            return None
        experts = sum(q.params for q in self.weights.parts if q.kind == "expert")
        share = p.params / experts if experts > 0 else 1.0
        layers = self.moe_layers() * share
        e = got.efficiency or 1.0
        t_b = got.memory_s * ops.bandwidth_scale / e * layers
        t_c = got.compute_s / e * layers / self.clock_factor
        label = "; ".join(x for x in (got.source, got.scaling, got.note) if x)
        calls = layers * (3 + float(self.overhead.get("moe_extra_kernels_per_layer", 0)))
        fl = 2.0 * elements * self.weights.expert_rows(tokens)
        return PartCost(p, self.weights.rows(p, tokens), r, efficiency.family(r.mma, r.dequant), 1, weight_bytes, 0.0,
                        fl, t_b, t_c, 0.0, 0.0, (e, f"measured MoE layer: {label}"), f"measured MoE layer: {label}",
                        (got.fixed_s or 0.0) * layers, label, calls)

    def _kv_measured_dtype(self, kv: KvDtype) -> str:
        """The measured KV dtype nearest ``kv`` (a narrower cache than FP8 is read by an FP8-class kernel)."""
        return {"bf16": "bfloat16", "fp16": "bfloat16", "fp32": "bfloat16"}.get(kv.kind, "fp8")

    def decode_attention(self, batch: int, context: float, kv: KvDtype, tp: int, queries: int,
                         unknown: set[str]) -> Attention:
        """Decode attention over every KV layer for ``batch`` sequences at ``context`` tokens: measured per
        layer where the card has evidence (16-bit or FP8 KV, no MLA), else KV bytes over the estimated
        rate against the attention FLOPs (and the unpack of a quantized KV cache)."""
        kvl = self.kv_layout(tp)
        a = self.arch
        ops = self.ops
        win = context if kvl.window is None else min(context, kvl.window)
        dt = self._kv_measured_dtype(kv)
        kv_bytes = batch * kvl.request_bytes(kv, context)
        t_kvdeq = 0.0          # issue time to unpack a cache the kernel cannot read as it is stored
        if kv.kind in KV_DEQUANT_INSTR and not (kv.kind == "fp8" and self.attn_mma in _FP8_NATIVE_ATTN):
            values = kv_bytes / (kv.bits / 8.0)
            t_kvdeq = self._issue_time(values * KV_DEQUANT_INSTR[kv.kind][0] / THREADS_PER_WARP, unknown)
        if ops is not None and ops.measured and a.mla is None and batch > 0 and (kvl.full_layers or kvl.window_layers):
            kv_heads = max(1, math.ceil((a.num_kv_heads or a.num_attention_heads) / max(tp, 1)))
            d = int(a.head_dim or a.hidden_size // max(a.num_attention_heads, 1))
            out = []
            for layers, c, window in ((kvl.full_layers, context, False), (kvl.window_layers, win, True)):
                if layers:
                    nbytes = batch * max(c, 1.0) * kvl.bytes_per_token_layer(kv, window=window)
                    got = measured.decode_attention_time(ops.evidence.gpu, batch, max(c, 1.0), kv_heads, d, dt,
                                                         engine=ops.engine, evidence=ops.evidence, nbytes=nbytes)
                    if got.seconds is None:
                        out = []
                        break
                    out.append((layers, got))
            if out:
                work = sum(n * (g.seconds - (g.fixed_s or 0.0)) for n, g in out) * ops.bandwidth_scale
                floor = sum(n * (g.fixed_s or 0.0) for n, g in out)
                g = out[0][1]
                # a cache read by another dtype's kernel (FP8 KV on a system measured in BF16 only, a 4-bit
                # cache) is unpacked on top of the measured read
                unpack = t_kvdeq if f"(KV {dt})" not in g.source or kv.kind not in ("bf16", "fp16", "fp8") else 0.0
                return Attention(work, unpack, floor, sum(n for n, _ in out),
                                 "; ".join(x for x in (g.source, g.scaling, g.note, "+ unpack issue time (estimate, "
                                                       "KV_DEQUANT_INSTR)" if unpack else "") if x))
        attn = self.attention_flops(batch * queries * context, batch * queries * win, decode=True) / tp
        t_attn = self._mma_time(attn, self.attn_mma, unknown)
        return Attention(kv_bytes / self._bw("kv"), t_attn + t_kvdeq, 0.0, 0.0, "")

    def prefill_attention(self, done: int, t: int, tp: int, unknown: set[str]) -> Attention:
        """Causal attention of a ``t``-token chunk after ``done`` tokens, every KV layer: the measured
        context-attention kernel at the chunk's work (its (query, key) pairs as an equivalent prompt
        length), or FLOPs over the estimated rate."""
        kvl = self.kv_layout(tp)
        full_pairs = t * done + t * (t + 1) / 2                      # causal (query, key) pairs
        win_pairs = full_pairs if kvl.window is None else sum_window_pairs(done, t, kvl.window)
        a, ops = self.arch, self.ops
        if ops is not None and ops.measured and a.mla is None and (kvl.full_layers or kvl.window_layers):
            heads = max(1, math.ceil(a.num_attention_heads / max(tp, 1)))
            d = int(a.head_dim or a.hidden_size // max(a.num_attention_heads, 1))
            out = []
            for layers, pairs in ((kvl.full_layers, full_pairs), (kvl.window_layers, win_pairs)):
                if layers:
                    got = measured.context_attention_time(ops.evidence.gpu, 1, math.sqrt(2.0 * pairs), heads, d,
                                                          engine=ops.engine, evidence=ops.evidence)
                    if got.seconds is None:
                        out = []
                        break
                    out.append((layers, got))
            if out:
                work = sum(n * (g.seconds - (g.fixed_s or 0.0)) for n, g in out) / self.clock_factor
                floor = sum(n * (g.fixed_s or 0.0) for n, g in out)
                g = out[0][1]
                return Attention(0.0, work, floor, sum(n for n, _ in out),
                                 "; ".join(x for x in (g.source, g.scaling, g.note, "chunk after a prefix as the "
                                                       "prompt length with the same causal (query, key) pairs") if x))
        ca = self._mma_time(self.attention_flops(full_pairs, win_pairs, decode=False) / tp, self.attn_mma, unknown)
        return Attention(0.0, ca, 0.0, 0.0, "")

    def allreduce(self, tokens: float, tp: int, graphs: bool) -> tuple[float, str]:
        """One all-reduce of ``tokens`` x hidden 16-bit activations across ``tp`` GPUs: the measured curve of
        the nearest system over the same link kind (bandwidth part scaled to this card's link), else the
        link estimate."""
        nbytes = tokens * self.arch.hidden_size * 2.0
        ops = self.ops
        if ops is not None and ops.link_kind:
            got = measured.allreduce_time(ops.evidence.gpu, tp, nbytes, link_kind=ops.link_kind,
                                          link_gbs=ops.link_gbs, engine=ops.engine, graph=graphs,
                                          evidence=ops.evidence)
            if got.seconds is not None:
                return got.seconds, "; ".join(x for x in (got.source, got.scaling, got.note) if x)
        d = self.link.allreduce(nbytes, tp)
        return d.value, d.source

    def _fixed(self, gpu_seconds: float, graphs: bool, tp: int, tokens: float,
               measured_calls: float = 0.0) -> tuple[float, float, float, str]:
        """(total step seconds, fixed part, host part, all-reduce source) given the GPU time of the step;
        ``measured_calls``: kernels whose measured times already hold their launch gaps."""
        o = self.overhead
        kernels = self.kernels_per_step()
        host = float(o["host_us_per_step"]) * 1e-6
        ar, ar_src = 0.0, ""
        if tp > 1:
            per, ar_src = self.allreduce(tokens, tp, graphs)
            ar = self.arch.num_layers * self.allreduce_per_layer * per
        # the device-side gap between dependent kernels is there with or without graphs; graphs remove
        # the CPU launch cost, which eager mode hides behind GPU work only while the GPU is busier
        gaps = max(0.0, kernels - measured_calls) * float(o["graph_us_per_kernel"]) * 1e-6
        gapped = gpu_seconds + gaps + ar
        if graphs:
            # an engine that schedules step n+1 while the GPU runs step n hides its host time behind the GPU
            total = max(gapped, host) if o.get("host_overlap") else gapped + host
        else:
            total = max(gapped, kernels * float(o["eager_us_per_kernel"]) * 1e-6) + host
        return total, total - gpu_seconds, host, ar_src

    # ---------------------------------------------------------------- decode
    def decode_step(self, batch: int, context: float, kv: KvDtype, *, tp: int = 1, graphs: bool = True,
                    extra: tuple[Part, ...] = (), verify_tokens: int = 1) -> StepCost:
        """One decode step of ``batch`` sequences at ``context`` tokens each; ``verify_tokens`` > 1
        scores that many positions per sequence in the same weight read (speculative verification).
        The kernels of a step run one after the other: the GPU time is the sum of each one's time."""
        m = batch * verify_tokens
        lin = self._steps.get((m, tp, extra))
        if lin is None:
            lin = self._steps[(m, tp, extra)] = self._decode_linear(m, tp, extra)
        costs, gpu, t_bytes, total_bytes, t_mma, t_deq, t_exposed, t_floor, calls, total_flops, unk = lin
        unknown = set(unk)
        kvl = self.kv_layout(tp)
        kv_bytes = batch * kvl.request_bytes(kv, context)
        att = self.decode_attention(batch, context, kv, tp, verify_tokens, unknown)
        gpu += att.seconds
        t_bytes += att.t_bytes
        t_floor += att.t_floor
        calls += att.calls
        total_bytes += kv_bytes
        st = self.recurrent(tp, kv, draft_tokens=verify_tokens - 1)
        state_bytes = batch * st.step_bytes(verify_tokens) if st is not None else 0.0
        t_state = state_bytes / self._bw("kv")
        gpu += t_state
        t_bytes += t_state
        total_bytes += state_bytes
        win = context if kvl.window is None else min(context, kvl.window)
        attn = self.attention_flops(m * context, m * win, decode=True) / tp
        t_compute = t_mma + t_deq + att.t_compute
        total, fixed, host, ar_src = self._fixed(gpu, graphs, tp, m, calls)
        bound = "bandwidth" if t_bytes >= t_compute else "compute"
        if fixed > gpu:
            bound = "overhead"
        sources = tuple(dict.fromkeys(x for x in [c.measured for c in costs] + [att.source, ar_src] if x))
        d = Derived(total, "s", "sum over kernels of (floor + max(t_bytes, t_compute) + t_exposed) + unmeasured "
                    "kernels x gap + all-reduce, host per step overlapped or added  (eager: max(t_gpu, launches) + host)",
                    {"B": batch, "C": context, "positions": verify_tokens, "M": m, "tp": tp,
                     "bytes_read": total_bytes, "kv_bytes": kv_bytes, "recurrent_state_bytes": state_bytes,
                     "t_gpu": gpu, "t_bytes": t_bytes, "t_mma": t_mma,
                     "t_dequant_issue": t_deq, "t_attention": att.seconds, "t_attention_compute": att.t_compute,
                     "t_floor": t_floor, "t_exposed": t_exposed, "t_fixed": fixed, "t_host": host,
                     "measured_kernels": calls, "cuda_graphs": graphs, "kv_dtype": kv.name,
                     "attention_source": att.source or "estimate: KV bytes / (DRAM x bandwidth_eff.kv) against the "
                     "attention FLOPs", **({"allreduce_source": ar_src} if ar_src else {})},
                    "roofline over the explained kernel path, each module group at the kernel it runs for M rows; "
                    + ("measured operators: " + " | ".join(sources) if sources else
                       "no measured operator (estimates; see the assumptions)"))
        return StepCost(total, t_bytes, t_compute, fixed, bound, total_bytes, total_flops + attn, d,
                        tuple(sorted(unknown)), tuple(costs), t_exposed, host, sources)

    def _decode_linear(self, m: int, tp: int, extra: tuple[Part, ...]) -> tuple:
        """The module groups' share of a decode step at M rows: per-group costs and their running sums
        (in decode_step's order), and the unknown rates; it does not depend on the batch split or the
        context, so decode_step keeps it per (M, tp, extra) (the curves revisit the same M)."""
        wm = self.weights
        bytes_parts = wm.step_bytes(m, tp)
        elems = wm.step_elements(m, tp)
        flops_tok = wm.flops_per_token(tp)
        for p in extra:                       # e.g. the MTP head when it drafts
            bytes_parts[p] = p.stored_bytes / tp
            elems[p] = p.params / tp
            flops_tok[p] = 2.0 * p.params / tp
        t_bytes = t_mma = t_deq = t_exposed = t_floor = calls = gpu = 0.0
        total_bytes = total_flops = 0.0
        unknown: set[str] = set()
        costs: list[PartCost] = []
        for p, b in bytes_parts.items():
            if b <= 0:
                continue
            c = self.part_cost(p, m, b, elems[p], flops_tok[p], unknown, tp=tp)
            costs.append(c)
            gpu += c.seconds
            t_bytes += c.t_bytes
            total_bytes += c.weight_bytes + c.copy_bytes
            t_mma += c.t_compute - c.t_dequant
            t_deq += c.t_dequant
            t_exposed += c.t_exposed
            t_floor += c.t_floor
            calls += c.calls
            total_flops += c.flops
        return (tuple(costs), gpu, t_bytes, total_bytes, t_mma, t_deq, t_exposed, t_floor, calls, total_flops,
                frozenset(unknown))

    def crossover_batch(self, context: float, kv: KvDtype, tp: int = 1, limit: int = 1 << 16) -> int | None:
        """Smallest batch <= limit whose compute time reaches its bytes time (None: bandwidth-bound up to
        limit; the plan passes the batch the KV pool can hold)."""
        def compute_bound(b: int) -> bool:
            s = self.decode_step(b, context, kv, tp=tp)
            return s.t_compute >= s.t_bytes
        limit = max(1, int(limit))
        if compute_bound(1):
            return 1
        if limit == 1:
            return None
        hi = 2
        while hi < limit and not compute_bound(hi):
            hi *= 2
        if hi >= limit:
            hi = limit
            if not compute_bound(hi):
                return None
        lo = hi // 2
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (lo, mid) if compute_bound(mid) else (mid, hi)
        return hi

    # ---------------------------------------------------------------- prefill
    def _linear_chunk(self, t: int, tp: int, deq_cal: dict[str, float],
                      unknown: set[str] | None = None) -> tuple[float, float, float]:
        """(t_bytes, t_mma, t_dequant) of the linear layers for one chunk of ``t`` tokens."""
        return self.linear_chunk(t, tp, deq_cal, unknown)[:3]

    def linear_chunk(self, t: int, tp: int, deq_cal: dict[str, float],
                     unknown: set[str] | None = None) -> tuple[float, float, float, float, tuple[PartCost, ...]]:
        """(t_bytes, t_mma, t_dequant, t_exposed + floors, per-group costs) of the linear layers for one chunk
        of ``t`` tokens: every group at the kernel it runs for M = t rows (logits: the last position only)."""
        unknown = set() if unknown is None else unknown
        wm = self.weights
        bytes_parts = wm.step_bytes(t, tp)
        elems = wm.step_elements(t, tp)
        flops_tok = wm.flops_per_token(tp)
        cb = cm = cd = ce = 0.0
        costs = []
        for p, b in bytes_parts.items():
            if p.kind == "embed" or b <= 0:
                continue
            c = self.part_cost(p, t, b, elems[p], flops_tok[p], unknown, tp=tp, prefill=True, deq_cal=deq_cal)
            costs.append(c)
            cb += c.t_bytes
            cm += c.t_compute - c.t_dequant
            cd += c.t_dequant
            ce += c.t_exposed + c.t_floor
        return cb, cm, cd, ce, tuple(costs)

    def prefill(self, prompt: int, chunk: int, kv: KvDtype, *, tp: int = 1, graphs: bool = True,
                dequant_overhead: dict[str, float] | None = None) -> PrefillCost:
        """Prefill of one ``prompt``-token request in chunks of ``chunk`` tokens: each chunk is a step whose
        kernels run one after the other (sum of each kernel's time) plus the step's fixed costs."""
        chunk = max(1, min(chunk, prompt))
        n = math.ceil(prompt / chunk)
        kvl = self.kv_layout(tp)
        deq_cal = dequant_overhead or {}
        unknown: set[str] = set()
        full = self.linear_chunk(chunk, tp, deq_cal, unknown)
        last_t = prompt - chunk * (n - 1)
        last = full if last_t == chunk else self.linear_chunk(last_t, tp, deq_cal, unknown)
        secs = t_b = t_c = t_d = t_f = t_a = 0.0
        done = 0
        t_e = 0.0
        att_src = ""
        for i in range(n):
            t = chunk if i < n - 1 else last_t
            cb, cm, cd, ce, parts = full if i < n - 1 else last
            past = kvl.request_bytes(kv, done) / self._bw("kv")          # past KV re-read by attention
            att = self.prefill_attention(done, t, tp, unknown)
            att_src = att_src or att.source
            gpu = sum(c.seconds for c in parts) + max(past, att.t_compute) + att.t_floor
            calls = sum(c.calls for c in parts) + att.calls
            total, fixed, _, _ = self._fixed(gpu, graphs, tp, t, calls)
            secs += total
            t_b, t_c, t_d, t_f, t_a, t_e = (t_b + cb + past, t_c + cm, t_d + cd, t_f + fixed, t_a + att.t_compute,
                                            t_e + ce + att.t_floor)
            done += t
        sources = tuple(dict.fromkeys(x for x in [c.measured for c in full[4]] + [att_src] if x))
        d = Derived(secs, "s", "sum over chunks of (sum over kernels of floor + max(t_bytes, t_compute) + t_exposed, "
                    "attention) + fixed",
                    {"P": prompt, "chunk": chunk, "chunks": n, "M": chunk, "t_bytes": t_b, "t_mma": t_c,
                     "t_dequant": t_d, "t_attention": t_a, "t_exposed": t_e, "t_fixed": t_f, "tp": tp,
                     "attention_source": att_src or "estimate: attention FLOPs / (peak x compute efficiency)"},
                    "roofline over the explained kernel path, each module group at the kernel it runs for "
                    "M = chunk rows; attention quadratic in P (full layers); "
                    + ("measured operators: " + " | ".join(sources) if sources else
                       "no measured operator (estimates; see the assumptions)"))
        return PrefillCost(secs, prompt / secs if secs > 0 else math.inf, t_b, t_c + t_a, t_d, t_f, n, d,
                           tuple(sorted(unknown)), full[4], t_e, sources)


def sum_window_pairs(done: int, t: int, w: int) -> float:
    """Sum over queries done+1..done+t of min(position, w)."""
    lo, hi = done + 1, done + t
    if hi <= w:
        return (lo + hi) * t / 2
    if lo > w:
        return float(t * w)
    below = (lo + w) * (w - lo + 1) / 2
    return below + (hi - w) * w


def module_groups_derived(cost: StepCost | PrefillCost, what: str) -> Derived:
    """Per module group: the kernel charged at the M of ``cost`` and every term with its source."""
    groups = [c.to_json() for c in cost.parts]
    total = sum(c.seconds for c in cost.parts)
    m = cost.derived.inputs.get("M", "")
    estimated = [c.part.name for c in cost.parts if not c.measured and c.part.gemm and c.part.kind != "embed"]
    return Derived(total, "s", f"sum over module groups of floor + max(t_bytes, t_compute) + t_exposed ({what}, "
                   f"M = {m})", {"M": m, "module_groups": groups},
                   "each group's kernel at M from its explain decision (threshold_source); measured_source names "
                   "the measured table of each group"
                   + (f"; estimate for {len(estimated)} group(s) without a measured kernel (bandwidth_eff_source, "
                      "compute_source, assumptions)" if estimated else ""))
