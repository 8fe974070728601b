"""Speculative decoding under concurrency: per-stream and aggregate decode speed for 1...max_batch
streams, with and without drafts, from what one speculative step costs at batch b with k drafts.

  t_plain(b)   = t_step(M = b)
  t_spec(b, k) = t_verify(M = b x (k+1)) + t_draft(b, k) + t_commit(b, k)
  per stream   = E(k) / t_spec          aggregate = b x E(k) / t_spec
  E(k)         = 1 + sum_j a_1 x ... x a_j           (speculative.expected_tokens)

t_verify is the target's step at M = b x (k+1) rows (roofline through PlanContext.decode): each module
group at the kernel its engine runs for that M, so a verify that crosses a row threshold pays the other
kernel (FastLLM: CUDA-core GEMV below 32 rows, dequantize to FP16 + cuBLAS from 32 on); the KV cache
is read once per sequence at its dtype's bits (plus the unpack where the attention kernel converts), the
linear-attention state is stored per verified position. t_draft is the draft's own forward: its weights
once per pass, its rows (DFlash: one pass over the b x (k+1) block; MTP/EAGLE: k passes of b rows),
its attention over its own KV and its output head over the drafted rows. t_commit is the copy of the
accepted linear-attention state that hybrid models make after verification where the engine copies.
Once the verify step turns compute-bound, b x (k+1) rows cost (k+1) times the FLOPs of b rows and the
gain of E(k) tokens per step is gone: the curve says at which batch speculation stops paying.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from advisor.cost import efficiency, speculative
from advisor.cost.context import PlanContext, Settings
from advisor.cost.derived import Derived
from advisor.cost.step_costs import StepCost, module_groups_derived

MIN_GAIN = 1.05               # speculative.choose: a k must beat plain decoding by 5 %
BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)


# ---------------------------------------------------------------- the step-time model (one place)
def target_step(ctx: PlanContext, s: Settings, batch: int, context: float, positions: int = 1) -> StepCost:
    """The target's decode step for ``batch`` sequences scoring ``positions`` tokens each
    (PlanContext.decode -> CostModel.decode_step, the API of /tmp/team/K-api.md)."""
    return ctx.decode(s, batch, context, verify_tokens=positions)


def _allreduce(ctx: PlanContext, rows: float, tp: int, graphs: bool) -> tuple[float, str]:
    """One all-reduce of ``rows`` x hidden 16-bit activations (the target's measured-or-estimated curve)."""
    if tp <= 1:
        return 0.0, ""
    return ctx.model.allreduce(rows, tp, graphs)


# ---------------------------------------------------------------- the draft
@dataclass(frozen=True)
class DraftShape:
    """What one draft forward reads and multiplies, all GPUs."""

    body_bytes: float       # draft decoder layers (or MTP modules) as loaded
    body_params: float
    head_bytes: float       # the output head the draft reads (its quantized copy where the engine makes one)
    head_params: float
    layers: int             # draft layers with attention (each reads its own KV)
    source: str


def draft_shape(ctx: PlanContext) -> DraftShape | None:
    """The draft's weights as the engine loads them (None: no draft model, e.g. n-gram lookup)."""
    m = ctx.spec_method
    if m is None or m.draft == "none":
        return None
    wm, arch = ctx.model.weights, ctx.checkpoint.arch
    layers = max(arch.num_layers, 1)
    layer_params = wm.params_of("dense") / layers
    head_params = float((arch.vocab_size or 0) * (arch.hidden_size or 0)) or wm.params_of("lm_head")
    if ctx.draft_head_quant():        # FastLLM FASTLLM_DRAFT_QUANT: a 4.5-bit copy of the head
        head_bytes, head_src = ctx.draft_head_copy_bytes(), ctx.engine.draft_quant.get("source", "")
    else:
        head_bytes, head_src = wm.bytes_of("lm_head"), "the target's lm_head as stored"
        head_params = wm.params_of("lm_head") or head_params
    if m.draft == "mtp_head":
        body = wm.bytes_of("mtp")
        params = wm.params_of("mtp")
        if not body:
            body, params = layer_params * 2.0, layer_params
        n = max(1, arch.mtp_layers)
        return DraftShape(body, params, head_bytes, head_params, n,
                          f"checkpoint MTP modules + the shared lm_head ({head_src})")
    if m.draft == "draft_model":
        nbytes, src = ctx.draft_weights()
        # a separate small model with its own head: its bytes hold everything it reads
        return DraftShape(nbytes, nbytes / 2.0, 0.0, 0.0, max(1, layers // 4),
                          f"{src}; 16-bit, a quarter of the target's layers (estimate)")
    nbytes, src = ctx.draft_weights()
    return DraftShape(nbytes, nbytes / 2.0, head_bytes, head_params, max(1, m.draft_layers),
                      f"{src}; {m.draft_source}; head: {head_src}")


def _sixteen_bit_rate(ctx: PlanContext) -> tuple[float | None, str]:
    """FLOP/s a 16-bit GEMM of the draft reaches (peak x power clock x the measured large-GEMM efficiency)
    and its source; None: the table has no 16-bit peak."""
    t = ctx.model.eff.mma_tflops
    mma = "hmma_bf16" if t.get("hmma_bf16") else "hmma_f16"
    if not t.get(mma):
        return None, ""
    eff, src = efficiency.compute_eff(mma, ctx.model.eff.sm)
    return t[mma] * 1e12 * ctx.model.clock_factor * eff, f"{mma} peak x compute efficiency {eff:.2f} ({src})"


def draft_pass(ctx: PlanContext, s: Settings, batch: int = 1, k: int = 1, context: float = 0.0) -> Derived:
    """Drafting k tokens for each of ``batch`` sequences, per GPU: passes x (max(bytes / bandwidth,
    FLOPs / 16-bit rate) + kernels x launch + 2 all-reduces per draft layer under TP)."""
    m = ctx.spec_method
    shape = draft_shape(ctx)
    if m is None or shape is None or m.passes == "0" or k <= 0:
        return Derived(0.0, "s", "no draft model (lookup on the host)", {}, "")
    arch, tp = ctx.checkpoint.arch, max(1, s.tp)
    block = m.passes == "1"
    passes = 1 if block else k
    rows = batch * (k + 1) if block else batch          # DFlash: the whole block, anchor included
    head_rows = batch * k if block else batch           # logits only where a token is drafted
    kv_token = ctx.kv_layout(s).bytes_per_token_layer(s.kv)     # one layer's KV per token, per GPU
    kv_bytes = batch * context * shape.layers * kv_token
    weights = (shape.body_bytes + shape.head_bytes) / tp
    nbytes = weights + kv_bytes
    heads = arch.num_attention_heads or 0
    d = arch.head_dim or (arch.hidden_size or 0) // max(heads, 1)
    attn = 2.0 * heads * 2 * d * rows * context * shape.layers / tp
    flops = (2.0 * (shape.body_params * rows + shape.head_params * head_rows)) / tp + attn
    bw = ctx.model.bandwidth_gbs * 1e9 * ctx.model.eff.bandwidth_eff["bf16"]
    rate, rate_src = _sixteen_bit_rate(ctx)
    t_bytes = nbytes / bw if bw > 0 else 0.0
    t_compute = flops / rate if rate else 0.0
    o = ctx.engine.overhead
    per_kernel = float(o["graph_us_per_kernel"] if s.cuda_graphs else o["eager_us_per_kernel"]) * 1e-6
    launches = shape.layers * float(o["kernels_per_layer"]) * per_kernel
    ar, ar_src = _allreduce(ctx, rows, tp, s.cuda_graphs)
    t_ar = 2 * shape.layers * ar
    per_pass = max(t_bytes, t_compute) + launches + t_ar
    t = passes * per_pass
    return Derived(t, "s", "passes x (max(draft bytes / N + draft KV, FLOPs / 16-bit rate) + draft kernels x launch "
                   "+ 2 all-reduces per draft layer)",
                   {"B": batch, "k": k, "passes": passes, "rows_per_pass": rows, "head_rows": head_rows,
                    "draft_layers": shape.layers, "draft_bytes": shape.body_bytes + shape.head_bytes, "N": tp,
                    "draft_kv_bytes": kv_bytes, "flops": flops, "bandwidth_Bps": bw,
                    "t_bytes": t_bytes, "t_compute": t_compute, "fixed_s": launches + t_ar,
                    "bound": "bandwidth" if t_bytes >= t_compute else "compute", "compute_rate": rate_src,
                    **({"allreduce_source": ar_src} if ar_src else {})},
                   shape.source + ("" if rate else "; 16-bit tensor peak unknown: compute left out (lower bound)"))


# ---------------------------------------------------------------- the linear-attention state
def state_commit(ctx: PlanContext, s: Settings, batch: int, k: int, acceptance: tuple[float, ...],
                 context: float = 0.0) -> Derived:
    """After verification a hybrid model keeps the state of the last accepted position; engines that
    copy it (rule ``speculative.state_commit`` of the engine profile) load and store one state per
    request: every step (SGLang) or only when a draft was rejected (FastLLM). Where the engine keeps no
    per-position snapshot for that many positions (FastLLM MTP above 6), a rejected step replays the
    target over the accepted prefix instead: one more target step at M = B x accepted tokens."""
    st = ctx.recurrent(replace(s, draft_tokens=k))
    rule = ctx.engine.state_commit
    when = str(rule.get("copy", "none"))
    if st is None or k <= 0 or when == "none":
        return Derived(0.0, "s", "no linear-attention state copy", {},
                       str(rule.get("source", "")) if st is not None else "")
    rejected = 1.0 - math.prod(acceptance[:k])
    m = ctx.spec_method
    above = rule.get("replay_above")
    if above and k + 1 > int(above) and m is not None and m.name in (rule.get("replay_methods") or ()):
        kept = max(1, round(speculative.expected_tokens(acceptance[:k])))
        replay = target_step(ctx, s, batch, context, kept)
        return Derived(rejected * replay.seconds, "s",
                       "rejected share x t_step(M = B x accepted tokens): the target replays the accepted prefix",
                       {"B": batch, "rejected_share": rejected, "replayed_positions": kept,
                        "t_replay": replay.seconds, "verify_positions": k + 1, "snapshots_up_to": int(above)},
                       str(rule.get("replay_source", "")))
    share = 1.0 if when == "every_step" else rejected
    nbytes = batch * share * 2.0 * st.state_bytes
    bw = ctx.model.bandwidth_gbs * 1e9 * ctx.model.eff.bandwidth_eff.get("kv", ctx.model.eff.bandwidth_eff["bf16"])
    return Derived(nbytes / bw if bw > 0 else 0.0, "s",
                   "B x copied share x (load + store) x state per request / bandwidth",
                   {"B": batch, "copied_share": share, "state_bytes": st.state_bytes, "copy": when},
                   str(rule.get("source", "")))


# ---------------------------------------------------------------- one step, one batch, the curve
@dataclass(frozen=True)
class SpecStep:
    batch: int                # streams
    k: int                    # draft tokens asked for
    expected_tokens: float
    seconds: float
    t_verify: float
    t_draft: float
    t_commit: float
    plain_seconds: float      # plain decoding of all ``batch`` streams
    derived: Derived
    running: int = 0          # streams one speculative step serves (the engine may run fewer at once)
    k_run: int = 0            # draft tokens the engine verifies (it may cap k for batched steps)

    @property
    def aggregate(self) -> float:
        return (self.running or self.batch) * self.expected_tokens / self.seconds if self.seconds > 0 else 0.0

    @property
    def per_stream(self) -> float:
        """Average over the ``batch`` streams (those the engine does not run in this step wait)."""
        return self.aggregate / self.batch

    @property
    def speedup(self) -> float:
        """Aggregate (and per-stream) speed against plain decoding of the same streams."""
        return self.aggregate * self.plain_seconds / self.batch if self.plain_seconds > 0 else 0.0


def _kernel_changes(plain: StepCost, verify: StepCost) -> str:
    """Module groups whose kernel at the verify M differs from the one at the plain M (row thresholds)."""
    before = {c.part.name: c for c in plain.parts}
    out = []
    for c in verify.parts:
        p = before.get(c.part.name)
        if p is not None and (p.kernel_label != c.kernel_label or p.launches != c.launches):
            extra = f", {c.launches} launches" if c.launches > 1 else ""
            src = c.kernel.source
            out.append(f"{c.part.name}: {c.kernel_label} at M={c.rows:g}{extra}" + (f" ({src})" if src else ""))
    return "; ".join(dict.fromkeys(out))


def batching(ctx: PlanContext, s: Settings, batch: int, k: int) -> tuple[int, int, str]:
    """(streams one speculative step runs, draft tokens it verifies, why) under the engine's batching
    rule ``speculative.batching`` (FastLLM MTP: at most 4 streams without TP, at most 5 drafts batched)."""
    rule = ctx.engine.spec_batching
    m = ctx.spec_method
    if not rule or m is None or m.name not in (rule.get("methods") or ()):
        return batch, k, ""
    running, k_run = batch, k
    cap = rule.get("single_gpu_batch_max")
    if cap and s.tp <= 1:
        running = min(batch, int(cap))
    if running > 1 and rule.get("positions_max"):
        k_run = min(k, int(rule["positions_max"]) - 1)
    why = str(rule.get("source", "")) if (running, k_run) != (batch, k) else ""
    return running, k_run, why


def spec_step(ctx: PlanContext, s: Settings, batch: int, k: int, context: float) -> SpecStep:
    """One speculative step of ``batch`` streams with ``k`` drafts (cached per context: the tuner and the
    plan's curve ask for the same steps)."""
    return ctx.memo(("spec_step", s.kv.name, s.tp, s.cuda_graphs, batch, k, context),
                    lambda: _spec_step(ctx, s, batch, k, context))


def _method(ctx: PlanContext) -> speculative.SpecMethod:
    """The plan's draft method: the step model is asked only where there is one."""
    if ctx.spec_method is None:
        raise ValueError("no speculative method: there is nothing to draft")
    return ctx.spec_method


def _spec_step(ctx: PlanContext, s: Settings, batch: int, k: int, context: float) -> SpecStep:
    m = _method(ctx)
    running, k_run, why = batching(ctx, s, batch, k)
    acc = speculative.curve(m, ctx.acceptance, k_run)
    e = speculative.expected_tokens(acc)
    plain = target_step(ctx, s, batch, context)
    verify = target_step(ctx, s, running, context, k_run + 1)
    draft = draft_pass(ctx, s, running, k_run, context)
    commit = state_commit(ctx, s, running, k_run, acc, context)
    t = verify.seconds + draft.value + commit.value
    vin = verify.derived.inputs
    agg = running * e / t if t > 0 else 0.0
    inputs = {"B": batch, "k": k, "M_verify": running * (k_run + 1), "E(k)": e,
              "acceptance": ",".join(f"{a:.3g}" for a in acc), "t_verify": verify.seconds, "verify_bound": verify.bound,
              "t_draft": draft.value, "draft_bound": draft.inputs.get("bound", "-"), "t_commit": commit.value,
              "t_plain": plain.seconds, "kv_dtype": s.kv.name, "kv_bytes_read": vin.get("kv_bytes", 0.0),
              "t_attention": vin.get("t_attention", 0.0), "per_stream_tok_s": agg / batch, "aggregate_tok_s": agg}
    if why:
        inputs.update(running_streams=running, k_verified=k_run, batching_source=why)
    changes = _kernel_changes(target_step(ctx, s, running, context), verify)
    if changes:
        inputs["kernels_at_verify_M"] = changes
    src = "; ".join(x for x in (m.source, "draft: " + draft.source if draft.source else "",
                                "state: " + commit.source if commit.value else "") if x)
    return SpecStep(batch, k, e, t, verify.seconds, draft.value, commit.value, plain.seconds,
                    Derived(t, "s", "t_verify(M = B x (k+1)) + t_draft(B, k) + t_commit; aggregate B x E(k) / t",
                            inputs, src), running, k_run)


def points(ctx: PlanContext, s: Settings, batch: int, context: float,
           ks: range = speculative.K_RANGE) -> list[SpecStep]:
    if ctx.spec_method is None:
        return []
    return [spec_step(ctx, s, batch, k, context) for k in ks]


def spec_points(ctx: PlanContext, s: Settings, batch: int, context: float) -> list[speculative.SpecPoint]:
    """Per k: the speedup at ``batch`` from the speculative step at that batch (``spec_step``)."""
    return [speculative.SpecPoint(p.k, p.expected_tokens, p.seconds, p.speedup, p.derived)
            for p in points(ctx, s, batch, context)]


@dataclass(frozen=True)
class CurveRow:
    batch: int
    plain_seconds: float
    chosen_k: int                          # 0: no k beats plain decoding by MIN_GAIN at this batch
    best: SpecStep                         # the k with the highest speedup (shown even when it loses)
    chosen: SpecStep | None

    @property
    def plain_aggregate(self) -> float:
        return self.batch / self.plain_seconds if self.plain_seconds > 0 else 0.0

    def to_json(self) -> dict:
        c = self.chosen or self.best
        return {"plain_aggregate_tok_s": _r(self.plain_aggregate), "plain_per_stream_tok_s": _r(self.plain_aggregate
                                                                                               / self.batch),
                "chosen_k": self.chosen_k, "best_k": self.best.k, "spec_aggregate_tok_s": _r(c.aggregate),
                "spec_per_stream_tok_s": _r(c.per_stream), "speedup": _r(c.speedup),
                "expected_tokens_per_step": _r(c.expected_tokens), "t_verify": _r(c.t_verify),
                "t_draft": _r(c.t_draft), "t_commit": _r(c.t_commit)}


@dataclass(frozen=True)
class SpecCurve:
    method: str
    rows: tuple[CurveRow, ...]
    stops_paying_at: int | None            # first batch of the curve where no k gains MIN_GAIN

    def to_json(self) -> dict:
        return {"method": self.method, "stops_paying_at": self.stops_paying_at,
                "min_gain": MIN_GAIN, "batches": {str(r.batch): r.to_json() for r in self.rows}}


def _r(v: float) -> float:
    return float(f"{v:.5g}")


def batches_up_to(limit: int) -> tuple[int, ...]:
    limit = max(1, int(limit))
    return tuple(sorted({b for b in BATCHES if b <= limit} | {limit}))


def row(ctx: PlanContext, s: Settings, batch: int, context: float, ks: range = speculative.K_RANGE) -> CurveRow:
    pts = points(ctx, s, batch, context, ks)
    k = speculative.choose(pts, min_gain=MIN_GAIN)
    best = max(pts, key=lambda p: p.speedup)
    chosen = next((p for p in pts if p.k == k), None)
    return CurveRow(batch, target_step(ctx, s, batch, context).seconds, k, best, chosen)


def curve(ctx: PlanContext, s: Settings, limit: int, context: float,
          ks: range = speculative.K_RANGE) -> SpecCurve | None:
    """Per batch 1...limit: plain decoding against the best paying k among ``ks`` (None: no draft method)."""
    if ctx.spec_method is None:
        return None
    rows: list[CurveRow] = []
    for b in batches_up_to(limit):
        # past the batch where no k pays, only the cheapest check: more drafts verify more rows
        rows.append(row(ctx, s, b, context, ks if not rows or rows[-1].chosen_k else ks[:1]))
    stops = next((r.batch for r in rows if r.chosen_k == 0), None)
    return SpecCurve(ctx.spec_method.name, tuple(rows), stops)


def step_derivations(ctx: PlanContext, s: Settings, batch: int, k: int, context: float) -> dict[str, Derived]:
    """Every term of one speculative step, each with its own derivation: the step, the target's verify
    step at M = running x (k+1) (and its module groups at that M), the draft pass, the state copy."""
    step = spec_step(ctx, s, batch, k, context)
    running, k_run = step.running or batch, step.k_run or k
    verify = target_step(ctx, s, running, context, k_run + 1)
    acc = speculative.curve(_method(ctx), ctx.acceptance, k_run)
    return {"speculative_step": step.derived, "speculative_verify_step": verify.derived,
            "speculative_verify_linear_layers": module_groups_derived(verify, f"speculative verify, {running} x "
                                                                              f"{k_run + 1} positions"),
            "speculative_draft_pass": draft_pass(ctx, s, running, k_run, context),
            "speculative_state_commit": state_commit(ctx, s, running, k_run, acc, context)}


def derivation(c: SpecCurve) -> Derived:
    """The curve as one derivation: where speculation stops paying and every row's terms."""
    return Derived(float(c.stops_paying_at or 0), "batch",
                   "first batch where max over k of E(k) x t_plain(B) / t_spec(B, k) < min_gain "
                   "(0: pays at every batch of the curve)",
                   {"min_gain": MIN_GAIN, **{f"B={r.batch}": r.to_json() for r in c.rows}},
                   "advisor.cost.spec_concurrency: t_verify from the roofline at M = B x (k+1), t_draft from the "
                   "draft's own roofline, t_commit from the engine's state-copy rule")
