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
  GDN layer (decode; prefill per chunk)         floor + state bytes / (BW e); floor + scan FLOPs / (peak e)
  Mamba2 layer (decode)                         measured conv update + SSM update and gated norm, each at least
                                                the measured small kernel (advisor.cost.mamba2_cost)
  all-reduce                                    the measured curve at M x hidden x 2 bytes and TP
  elementwise kernels between them (norms,     per layer x the measured small kernel (vLLM static_scaled_fp8_quant)
  rotary + cache write, activation, residual)   at M x hidden, step_overhead.elementwise_kernels_per_layer
  t_step = sum of kernel times + other unmeasured kernels x gap + all-reduces, with the host time per step
           overlapped where the engine schedules the next step while the GPU runs (vLLM async scheduling,
           SGLang's overlap scheduler), added where it does not.

The pieces live beside it: the rates (advisor.cost.rates), attention (advisor.cost.attention_cost), the
measured GEMM and MoE charges (advisor.cost.measured_kernels) and the cost records (advisor.cost.step_costs);
this module composes them per module group, decode step and prefill chunk. Over ~400 lines on purpose: the
decode step and the prefill chunk add up the same terms (groups, attention, linear attention, fixed costs),
so they are read and changed side by side.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field

from advisor.checkpoint.model import ArchInfo
from advisor.cost import attention_cost, efficiency, measured, measured_kernels, recurrent_state
from advisor.cost.derived import Derived
from advisor.cost.efficiency import (
    LEGACY_MMA_SYNC_NOTE,
    MARLIN_MMA_SYNC_NOTE,
    THREADS_PER_WARP,
    WEIGHT_ONLY,
    Efficiencies,
    legacy_mma_sync,
    padded_rows,
)
from advisor.cost.interconnect import Link
from advisor.cost.kv import KvDtype, KvLayout, layout
from advisor.cost.rates import Rates
from advisor.cost.step_costs import PartCost, PrefillCost, StepCost
from advisor.cost.weights import Part, WeightModel


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
    _ew: dict = field(default_factory=dict, init=False, compare=False, repr=False)   # elementwise() per tokens
    rates: Rates = field(init=False, compare=False, repr=False)    # the fields above as rates (advisor.cost.rates)

    def __post_init__(self) -> None:
        object.__setattr__(self, "rates", Rates(self.eff, self.clock_factor, self.bandwidth_gbs))

    def recurrent(self, tp: int, kv: KvDtype, draft_tokens: int = 0, cc: tuple[int, int] | None = None,
                  architecture: str = "") -> recurrent_state.RecurrentState | None:
        """The linear-attention layers' per-request state (None: the model keeps none)."""
        return recurrent_state.build(self.state_rules, self.arch, tp=tp,
                                     attn_token_bytes=self.kv_layout(tp).bytes_per_token_layer(kv),
                                     draft_tokens=draft_tokens, model_dtype=self.model_dtype, cc=cc,
                                     architecture=architecture)

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

    def elementwise(self, tokens: float) -> tuple[float, float, str]:
        """(kernels, seconds, source) of the elementwise kernels between the measured operators in one forward
        over ``tokens`` rows: step_overhead.elementwise_kernels_per_layer x layers, each the measured small
        kernel at tokens x hidden (advisor.cost.measured.elementwise_time); (0, 0, "") without a count or
        evidence (their gaps stay in the flat estimate)."""
        hit = self._ew.get(tokens)
        if hit is not None:
            return hit
        n = float(self.overhead.get("elementwise_kernels_per_layer", 0) or 0)
        out = (0.0, 0.0, "")
        if n and self.ops is not None and self.ops.measured:
            got = measured.elementwise_time(self.ops.evidence.gpu, max(tokens, 1.0), self.arch.hidden_size,
                                            engine=self.ops.engine, evidence=self.ops.evidence)
            if got.seconds is not None:
                calls = n * self.arch.num_layers
                out = (calls, calls * got.seconds,
                       "; ".join(x for x in (got.source, got.scaling, got.note,
                                             str(self.overhead.get("elementwise_source", ""))) if x))
        self._ew[tokens] = out
        return out

    def kv_layout(self, tp: int, draft_layers: int = 0) -> KvLayout:
        return layout(self.arch, tp, draft_layers, self.swa_full_tokens_ratio)

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
        warp_instr = elements * dc.instr_per_element * passes / THREADS_PER_WARP
        return (1.0 - dc.overlap) * self.rates.issue_time(warp_instr, set() if unknown is None else unknown)

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
        reread = launches if launches > 1 and p.member_bytes / p.ranks(tp) > self.eff.l2_bytes else 1
        if r.read_bytes_per_element:          # the engine reads its own layout, not the checkpoint's
            nbytes = elements * r.read_bytes_per_element
        weight_bytes = nbytes * reread
        copy_bytes = elements * 4.0 if fam == "copy" else 0.0      # FP16 written, then read by the GEMM
        if p.kind == "expert":
            extra_kernels = float(self.overhead.get("moe_extra_kernels_per_layer", 0))
            got = measured_kernels.moe(self.ops, self.arch, wm, p, 1.0 if head_once else tokens, tp, r, weight_bytes,
                                       elements, moe_layers=self.moe_layers(), extra_kernels_per_layer=extra_kernels,
                                       clock_factor=self.clock_factor)
            if got is not None:
                return got
        elif nbytes > 0 and fam == "native":
            got = measured_kernels.gemm(self.ops, wm, p, rows, r, tp, weight_bytes, self.clock_factor)
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
        bf16 = measured_kernels.gemm_bf16(self.ops, wm, p, rows, tp) if fam == "tiled" and nbytes > 0 else None
        if r.mma == "none" and r.dequant != "cpu":
            t_mma, csrc = self.rates.cuda_core_time(fl, unknown), "CUDA-core FMA rate (assumption cuda_core_tflops)"
        elif bf16 is not None and r.mma not in self.eff.calibrated_mma:
            # the 16-bit MMA a weight-only kernel issues, at the efficiency a 16-bit GEMM of this shape reached
            e = bf16.efficiency or 1.0
            csrc = (f"table peak of {r.mma} x measured BF16 GEMM efficiency {e:.3g} at this M and "
                    f"N*K ({bf16.source}; {bf16.scaling})")
            if legacy_mma_sync(r.mma, self.eff.sm):
                marlin = self.marlin_rate
                if marlin is not None and marlin[0] < e:
                    e = marlin[0]
                    csrc = f"table peak of {r.mma} x {e:.3g}: {MARLIN_MMA_SYNC_NOTE} ({marlin[1]})"
                elif marlin is None:
                    csrc += f"; {LEGACY_MMA_SYNC_NOTE}"
            t_mma = self.rates.peak_time(fl, r.mma, e, unknown)
        else:
            t_mma, csrc = self.rates.mma_time(fl, r.mma, unknown), f"tensor peak mma_tflops.{r.mma}"
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
            share = measured_kernels.call_share(wm, p)
            floor, calls = (bf16.fixed_s or 0.0) * share, share
            src = (f"floor: the measured BF16 GEMM floor stands in for {r.kernel or 'the weight-only kernel'} "
                   f"(no dense measurement of it) — {bf16.source}; {bf16.scaling}")
        else:
            cf = efficiency.call_floor(fam, self.eff.sm)[0] * p.count
            exposed += max(0.0, cf - max(t_b, t_c) - exposed) if nbytes > 0 else 0.0
        return PartCost(p, rows, r, fam, launches if reread > 1 else 1, weight_bytes, copy_bytes, fl, t_b, t_c,
                        t_deq, exposed, bw_eff, csrc, floor, src, calls)

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

    def host_seconds(self, requests: float) -> float:
        """The engine's host time per step with ``requests`` running: the flat per-step figure, plus the
        measured growth of the scheduler's work from one request to ``requests`` (host_scheduler_us)."""
        host = float(self.overhead["host_us_per_step"])
        pts = self._host_points
        if pts and requests > 1:
            host += _interp(pts, float(requests)) - _interp(pts, 1.0)
        return host * 1e-6

    @functools.cached_property
    def marlin_rate(self) -> tuple[float, str] | None:
        """Marlin's measured mma.sync efficiency on this card's system and its source (None: no table);
        asked for every Marlin module group and M, looked up once."""
        return measured.marlin_mma_sync_efficiency(self.ops)

    @functools.cached_property
    def _host_points(self) -> list[tuple[float, float]]:
        """host_scheduler_us's [N, us] pairs, sorted once (every step asks host_seconds)."""
        return sorted((float(n), float(us)) for n, us in self.overhead.get("host_scheduler_us") or ())

    def _fixed(self, gpu_seconds: float, graphs: bool, tp: int, tokens: float,
               measured_calls: float = 0.0, requests: float = 1.0) -> tuple[float, float, float, str]:
        """(total step seconds, fixed part, host part, all-reduce source) given the GPU time of the step;
        ``measured_calls``: kernels whose measured times already hold their launch gaps; ``requests``: the
        running requests the engine schedules this step (its host work grows with them)."""
        o = self.overhead
        kernels = self.kernels_per_step()
        host = self.host_seconds(requests)
        ar, ar_src = 0.0, ""
        if tp > 1:
            per, ar_src = self.allreduce(tokens, tp, graphs)
            ar = self.arch.num_layers * self.allreduce_per_layer * per
        # the device-side gap between dependent kernels is there with or without graphs; graphs remove
        # the CPU launch cost, which eager mode hides behind GPU work only while the GPU is busier. The
        # elementwise kernels between the measured operators are charged the measured small kernel (its
        # time holds its launch gap); the rest keep the flat in-graph gap (an estimate)
        ew_calls, ew_seconds, _ = self.elementwise(tokens)
        gaps = max(0.0, kernels - measured_calls - ew_calls) * float(o["graph_us_per_kernel"]) * 1e-6 + ew_seconds
        gapped = gpu_seconds + gaps + ar
        if graphs:
            # an engine that schedules step n+1 while the GPU runs step n hides its host time behind the GPU
            total = max(gapped, host) if o.get("host_overlap") else gapped + host
        else:
            total = max(gapped, kernels * float(o["eager_us_per_kernel"]) * 1e-6) + host
        return total, total - gpu_seconds, host, ar_src

    def _elementwise_inputs(self, tokens: float) -> dict:
        """The derivation's terms for the kernels between the measured operators at ``tokens`` rows."""
        calls, seconds, src = self.elementwise(tokens)
        if not calls:
            return {"elementwise_source": "estimate: every kernel not measured costs step_overhead."
                                          "graph_us_per_kernel (no measured elementwise kernel for this card, or "
                                          "no elementwise_kernels_per_layer for this engine)"}
        return {"elementwise_kernels": calls, "t_elementwise": seconds, "elementwise_source": src}

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
        att = attention_cost.decode(self.rates, self.arch, self.ops, self.attn_mma, kvl, self.kv_layout(1), batch,
                                    context, kv, tp, verify_tokens, unknown)
        gpu += att.seconds
        t_bytes += att.t_bytes
        t_floor += att.t_floor
        calls += att.calls
        total_bytes += kv_bytes
        st = self.recurrent(tp, kv, draft_tokens=verify_tokens - 1)
        state_bytes = batch * st.step_bytes(verify_tokens) if st is not None else 0.0
        info = self.arch.linear_state
        inner = math.ceil(info.num_heads / tp) * info.head_dim if info is not None and info.num_heads else 0
        lin_att = attention_cost.linear_decode(self.rates, self.ops, st, batch, verify_tokens, inner)
        gpu += lin_att.seconds
        t_bytes += lin_att.t_bytes
        t_floor += lin_att.t_floor
        calls += lin_att.calls
        total_bytes += state_bytes
        win = context if kvl.window is None else min(context, kvl.window)
        attn = attention_cost.flops(self.arch, self.kv_layout(1), m * context, m * win, decode=True) / tp
        t_compute = t_mma + t_deq + att.t_compute
        total, fixed, host, ar_src = self._fixed(gpu, graphs, tp, m, calls, requests=batch)
        bound = "bandwidth" if t_bytes >= t_compute else "compute"
        if fixed > gpu:
            bound = "overhead"
        sources = tuple(dict.fromkeys(x for x in [c.measured for c in costs] + [att.source, _measured(lin_att),
                                                                                 ar_src] if x))
        d = Derived(total, "s", "sum over kernels of (floor + max(t_bytes, t_compute) + t_exposed) + unmeasured "
                    "kernels x gap + all-reduce, host per step overlapped or added  "
                    "(eager: max(t_gpu, launches) + host)",
                    {"B": batch, "C": context, "positions": verify_tokens, "M": m, "tp": tp,
                     "bytes_read": total_bytes, "kv_bytes": kv_bytes, "recurrent_state_bytes": state_bytes,
                     "t_gpu": gpu, "t_bytes": t_bytes, "t_mma": t_mma,
                     "t_dequant_issue": t_deq, "t_attention": att.seconds, "t_attention_compute": att.t_compute,
                     "t_floor": t_floor, "t_exposed": t_exposed, "t_fixed": fixed, "t_host": host,
                     "measured_kernels": calls, "cuda_graphs": graphs, "kv_dtype": kv.name,
                     "attention_source": att.source or "estimate: KV bytes / (DRAM x bandwidth_eff.kv) against the "
                     "attention FLOPs", **({"allreduce_source": ar_src} if ar_src else {}),
                     **({"t_linear_attention": lin_att.seconds, "linear_attention_source": lin_att.source}
                        if lin_att.source else {}), **self._elementwise_inputs(m)},
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
        for p in extra:                       # e.g. the MTP head when it drafts (replicated groups unsplit)
            bytes_parts[p] = p.stored_bytes / p.ranks(tp)
            elems[p] = p.params / p.ranks(tp)
            flops_tok[p] = 2.0 * p.params / p.ranks(tp)
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
        secs = t_b = t_c = t_d = t_f = t_a = t_lin = 0.0
        done = 0
        t_e = 0.0
        att_src = ""
        lin_full = attention_cost.linear_prefill(self.rates, self.arch, self.ops, self.attn_mma, chunk, tp, unknown)
        lin_last = lin_full if last_t == chunk else attention_cost.linear_prefill(
            self.rates, self.arch, self.ops, self.attn_mma, last_t, tp, unknown)
        for i in range(n):
            t = chunk if i < n - 1 else last_t
            cb, cm, cd, ce, parts = full if i < n - 1 else last
            past = kvl.request_bytes(kv, done) / self.rates.bw("kv")          # past KV re-read by attention
            att = attention_cost.prefill(self.rates, self.arch, self.ops, self.attn_mma, kvl, self.kv_layout(1), done,
                                         t, tp, unknown)
            att_src = att_src or att.source
            lin = lin_full if i < n - 1 else lin_last
            gpu = sum(c.seconds for c in parts) + max(past, att.t_compute) + att.t_floor + lin.seconds
            calls = sum(c.calls for c in parts) + att.calls + lin.calls
            t_lin += lin.seconds
            total, fixed, _, _ = self._fixed(gpu, graphs, tp, t, calls)
            secs += total
            t_b, t_c, t_d, t_f, t_a, t_e = (t_b + cb + past, t_c + cm, t_d + cd, t_f + fixed, t_a + att.t_compute,
                                            t_e + ce + att.t_floor)
            done += t
        sources = tuple(dict.fromkeys(x for x in [c.measured for c in full[4]] + [att_src, _measured(lin_full)]
                                      if x))
        d = Derived(secs, "s", "sum over chunks of (sum over kernels of floor + max(t_bytes, t_compute) + t_exposed, "
                    "attention, linear attention) + fixed",
                    {"P": prompt, "chunk": chunk, "chunks": n, "M": chunk, "t_bytes": t_b, "t_mma": t_c,
                     "t_dequant": t_d, "t_attention": t_a, "t_exposed": t_e, "t_fixed": t_f, "tp": tp,
                     "attention_source": att_src or "estimate: attention FLOPs / (peak x compute efficiency)",
                     **({"t_linear_attention": t_lin, "linear_attention_source": lin_full.source}
                        if lin_full.source else {}), **self._elementwise_inputs(chunk)},
                    "roofline over the explained kernel path, each module group at the kernel it runs for "
                    "M = chunk rows; attention quadratic in P (full layers); "
                    + ("measured operators: " + " | ".join(sources) if sources else
                       "no measured operator (estimates; see the assumptions)"))
        return PrefillCost(secs, prompt / secs if secs > 0 else math.inf, t_b, t_c + t_a + t_lin, t_d, t_f, n, d,
                           tuple(sorted(unknown)), full[4], t_e, sources)


def _measured(a) -> str:
    """An attention record's source if it was measured ("" for an estimate)."""
    return "" if a.source.startswith("estimate") else a.source


def _interp(pts: list[tuple[float, float]], x: float) -> float:
    """Piecewise-linear y(x) through ``pts`` (sorted by x), extended with the end segments' slopes."""
    if len(pts) == 1:
        return pts[0][1]
    i = 1
    while i < len(pts) - 1 and x > pts[i][0]:
        i += 1
    (x0, y0), (x1, y1) = pts[i - 1], pts[i]
    return y0 + (y1 - y0) * (x - x0) / (x1 - x0)
