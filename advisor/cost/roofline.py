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
A rate the GPU table lacks (peak or clock null) is never taken as infinite: its term is left out and
named in ``unknown``, so the time is a lower bound and the plan reports the speed as N/A.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from advisor.checkpoint.model import ArchInfo
from advisor.cost.derived import Derived
from advisor.cost.efficiency import (DEQUANT_INSTR, DEQUANT_M_TILE, DEQUANT_OVERLAP, KV_DEQUANT_INSTR,
                                     THREADS_PER_WARP, WEIGHT_ONLY, Efficiencies, padded_rows)
from advisor.cost.interconnect import Link
from advisor.cost import recurrent_state
from advisor.cost.kv import KvDtype, KvLayout, layout
from advisor.cost.weights import Part, WeightModel

# Attention MMA classes that consume FP8 KV natively (no unpack before the MMA).
_FP8_NATIVE_ATTN = ("qmma_e4m3", "wgmma_e4m3", "tcgen05_e4m3")


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

    def _issue(self) -> float | None:
        return self.eff.issue_rate * self.clock_factor if self.eff.issue_rate > 0 else None

    def _mma_time(self, flops: float, mma: str, unknown: set[str]) -> float:
        rate = self._mma_rate(mma)
        if rate is None:
            if flops > 0:
                unknown.add(f"tensor peak for {mma}")
            return 0.0
        return flops / rate

    def _issue_time(self, warp_instr: float, unknown: set[str]) -> float:
        rate = self._issue()
        if rate is None:
            if warp_instr > 0:
                unknown.add("SM clock (dequant issue rate)")
            return 0.0
        return warp_instr / rate

    def _bw(self, cls: str) -> float:
        return self.bandwidth_gbs * 1e9 * self.eff.bandwidth_eff.get(cls, self.eff.bandwidth_eff["bf16"])

    def _part_bw(self, p: Part) -> float:
        """Experts stream through a grouped MoE GEMM, slower than the dense kernel of their format."""
        if p.kind == "expert" and "moe_grouped" in self.eff.bandwidth_eff:
            return min(self._bw(p.kernel_class), self._bw("moe_grouped"))
        return self._bw(p.kernel_class)

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
    def _dequant_seconds(self, part: Part, elements: float, rows: float, unknown: set[str] | None = None) -> float:
        if part.kernel_class not in WEIGHT_ONLY or part.dequant in ("none", "cpu"):
            return 0.0
        ipe = DEQUANT_INSTR[part.kernel_class][0]
        passes = max(1, math.ceil(rows / DEQUANT_M_TILE[0]))
        return (1.0 - DEQUANT_OVERLAP[0]) * self._issue_time(elements * ipe * passes / THREADS_PER_WARP,
                                                             set() if unknown is None else unknown)

    def _fixed(self, gpu_seconds: float, graphs: bool, tp: int, tokens: float) -> tuple[float, float]:
        """(total step seconds, fixed part) given the GPU time of the step."""
        o = self.overhead
        kernels = self.kernels_per_step()
        host = float(o["host_us_per_step"]) * 1e-6
        ar = 0.0
        if tp > 1:
            per = self.link.allreduce(tokens * self.arch.hidden_size * 2.0, tp).value
            ar = self.arch.num_layers * self.allreduce_per_layer * per
        # the device-side gap between dependent kernels is there with or without graphs; graphs remove
        # the CPU launch cost, which eager mode hides behind GPU work only while the GPU is busier
        gapped = gpu_seconds + kernels * float(o["graph_us_per_kernel"]) * 1e-6
        if graphs:
            total = gapped + host + ar
        else:
            total = max(gapped, kernels * float(o["eager_us_per_kernel"]) * 1e-6) + host + ar
        return total, total - gpu_seconds

    # ---------------------------------------------------------------- decode
    def decode_step(self, batch: int, context: float, kv: KvDtype, *, tp: int = 1, graphs: bool = True,
                    extra: tuple[Part, ...] = (), verify_tokens: int = 1) -> StepCost:
        """One decode step of ``batch`` sequences at ``context`` tokens each; ``verify_tokens`` > 1
        scores that many positions per sequence in the same weight read (speculative verification)."""
        wm = self.weights
        m = batch * verify_tokens
        bytes_parts = wm.step_bytes(m, tp)
        elems = wm.step_elements(m, tp)
        flops_tok = wm.flops_per_token(tp)
        for p in extra:                       # e.g. the MTP head when it drafts
            bytes_parts[p] = p.stored_bytes / tp
            elems[p] = p.params / tp
            flops_tok[p] = 2.0 * p.params / tp
        t_bytes = t_mma = t_deq = 0.0
        total_bytes = total_flops = 0.0
        unknown: set[str] = set()
        for p, b in bytes_parts.items():
            if b <= 0:
                continue
            extra_bytes = elems[p] * 4.0 if p.dequant == "memory" else 0.0   # FP16 copy written + read
            t_bytes += (b + extra_bytes) / self._part_bw(p)
            total_bytes += b + extra_bytes
            if p.kind == "expert" and wm.num_experts:
                touched = wm.num_experts * wm.experts_fraction(m)
                rows = m * wm.top_k / max(touched, 1e-9)
                fl = 2.0 * elems[p] * padded_rows(p.mma, rows)
            else:
                rows = m
                fl = flops_tok[p] * padded_rows(p.mma, m)
            t_mma += self._mma_time(fl, p.mma, unknown)
            t_deq += self._dequant_seconds(p, elems[p], rows, unknown)
            total_flops += fl
        kvl = self.kv_layout(tp)
        kv_bytes = batch * kvl.request_bytes(kv, context)
        t_bytes += kv_bytes / self._bw("kv")
        total_bytes += kv_bytes
        st = self.recurrent(tp, kv, draft_tokens=verify_tokens - 1)
        state_bytes = batch * st.step_bytes(verify_tokens) if st is not None else 0.0
        t_bytes += state_bytes / self._bw("kv")
        total_bytes += state_bytes
        win = context if kvl.window is None else min(context, kvl.window)
        attn = self.attention_flops(m * context, m * win, decode=True) / tp
        t_attn = self._mma_time(attn, self.attn_mma, unknown)
        t_kvdeq = 0.0
        if kv.kind in KV_DEQUANT_INSTR and not (kv.kind == "fp8" and self.attn_mma in _FP8_NATIVE_ATTN):
            values = kv_bytes / (kv.bits / 8.0)
            t_kvdeq = self._issue_time(values * KV_DEQUANT_INSTR[kv.kind][0] / THREADS_PER_WARP, unknown)
        t_compute = t_mma + t_deq + t_attn + t_kvdeq
        gpu = max(t_bytes, t_compute)
        total, fixed = self._fixed(gpu, graphs, tp, m)
        bound = "bandwidth" if t_bytes >= t_compute else "compute"
        if fixed > gpu:
            bound = "overhead"
        d = Derived(total, "s", "max(t_bytes, t_compute) + fixed  (eager: max(t_gpu, launches) + host)",
                    {"B": batch, "C": context, "positions": verify_tokens, "tp": tp,
                     "bytes_read": total_bytes, "kv_bytes": kv_bytes, "recurrent_state_bytes": state_bytes,
                     "t_bytes": t_bytes, "t_mma": t_mma,
                     "t_dequant_issue": t_deq, "t_attention": t_attn, "t_kv_unpack": t_kvdeq,
                     "t_fixed": fixed, "cuda_graphs": graphs, "kv_dtype": kv.name},
                    "roofline over the explained kernel path")
        return StepCost(total, t_bytes, t_compute, fixed, bound, total_bytes, total_flops + attn, d,
                        tuple(sorted(unknown)))

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
        unknown = set() if unknown is None else unknown
        wm = self.weights
        bytes_parts = wm.step_bytes(t, tp)
        elems = wm.step_elements(t, tp)
        flops_tok = wm.flops_per_token(tp)
        cb = cm = cd = 0.0
        for p, b in bytes_parts.items():
            if p.kind == "embed":
                continue
            cb += b / self._part_bw(p)
            if p.kind == "expert" and wm.num_experts:
                rows = t * wm.top_k / max(wm.num_experts * wm.experts_fraction(t), 1e-9)
            else:
                rows = t
            # logits are computed for the last position of the prompt only
            mt = self._mma_time(flops_tok[p] * (1 if p.kind == "lm_head" else t), p.mma, unknown)
            cm += mt
            if p.kernel_class in deq_cal and p.kernel_class in WEIGHT_ONLY:
                cd += mt * max(0.0, deq_cal[p.kernel_class])      # measured on this GPU
            else:
                cd += self._dequant_seconds(p, elems[p], rows, unknown)
        return cb, cm, cd

    def prefill(self, prompt: int, chunk: int, kv: KvDtype, *, tp: int = 1, graphs: bool = True,
                dequant_overhead: dict[str, float] | None = None) -> PrefillCost:
        """Prefill of one ``prompt``-token request in chunks of ``chunk`` tokens:
        sum over chunks of max(t_bytes, t_mma + t_dequant + t_attention) + fixed."""
        chunk = max(1, min(chunk, prompt))
        n = math.ceil(prompt / chunk)
        kvl = self.kv_layout(tp)
        deq_cal = dequant_overhead or {}
        unknown: set[str] = set()
        full = self._linear_chunk(chunk, tp, deq_cal, unknown)
        last_t = prompt - chunk * (n - 1)
        last = full if last_t == chunk else self._linear_chunk(last_t, tp, deq_cal, unknown)
        secs = t_b = t_c = t_d = t_f = t_a = 0.0
        done = 0
        for i in range(n):
            t = chunk if i < n - 1 else last_t
            cb, cm, cd = full if i < n - 1 else last
            cb += kvl.request_bytes(kv, done) / self._bw("kv")          # past KV re-read by attention
            full_pairs = t * done + t * (t + 1) / 2                      # causal (query, key) pairs
            win_pairs = full_pairs if kvl.window is None else sum_window_pairs(done, t, kvl.window)
            ca = self._mma_time(self.attention_flops(full_pairs, win_pairs, decode=False) / tp, self.attn_mma,
                                unknown)
            gpu = max(cb, cm + cd + ca)
            total, fixed = self._fixed(gpu, graphs, tp, t)
            secs += total
            t_b, t_c, t_d, t_f, t_a = t_b + cb, t_c + cm, t_d + cd, t_f + fixed, t_a + ca
            done += t
        d = Derived(secs, "s", "sum over chunks of max(t_bytes, t_mma + t_dequant + t_attention) + fixed",
                    {"P": prompt, "chunk": chunk, "chunks": n, "t_bytes": t_b, "t_mma": t_c,
                     "t_dequant": t_d, "t_attention": t_a, "t_fixed": t_f, "tp": tp},
                    "roofline over the explained kernel path; attention quadratic in P (full layers)")
        return PrefillCost(secs, prompt / secs if secs > 0 else math.inf, t_b, t_c + t_a, t_d, t_f, n, d,
                           tuple(sorted(unknown)))


def sum_window_pairs(done: int, t: int, w: int) -> float:
    """Sum over queries done+1..done+t of min(position, w)."""
    lo, hi = done + 1, done + t
    if hi <= w:
        return (lo + hi) * t / 2
    if lo > w:
        return float(t * w)
    below = (lo + w) * (w - lo + 1) / 2
    return below + (hi - w) * w
