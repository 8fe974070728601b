"""Time to first token and output rate as a server delivers them, alone and under the workload's load.

isolated TTFT = per-request cost + the prefill in chunks of the engine's size (each chunk one step
                with its fixed costs; the first token is sampled in the last chunk's step)
loaded TTFT   = per-request cost + queueing behind the prefills of the other streams
                + the prefill in mixed steps: each step's token budget serves the c - 1 running
                decodes first, the new prompt gets what is left (vLLM's scheduler), so the prompt
                takes more, slower steps
                An engine whose profile says its prefill does not mix (step_overhead.prefill_mixes_decode
                false: SGLang without --enable-mixed-chunk) runs the prompt in prefill-only steps of its
                chunk size, which run first while every decode waits
  queueing    closed loop of c streams: a new request finds another prefill in progress with
              probability rho = the engine's share of time spent on the others' prefills, and waits
              half of one on average (residual of a prefill in progress)
served output rate at c streams = c x O / (c x n x t_mixed + max(0, O - n (c - 1)) x t_decode(c)):
  per cycle of c requests, c x n mixed steps (each also decodes c - 1 tokens) and the pure decode
  steps the remaining output needs.
  without mixing: c x O / (c x T_prefill + O x t_decode(c)): the decodes ride no prefill step, so every
  stream's O tokens take O decode steps and the c prefills stall them in turn.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from advisor.cost.derived import Derived

SCHEDULE_SOURCE = ("vllm/v1/core/sched/scheduler.py:719 (token budget = max_num_batched_tokens), 793-1002 (running "
                   "requests first), 1049-1570 (waiting requests take what is left)@0.33.0")
SEPARATE_SOURCE = ("sglang/srt/managers/scheduler.py:3992-4002 (a new prefill batch runs first; the running "
                   "decodes step only when none is ready), 1376-1378 and 4375-4395 (decodes join a prefill "
                   "batch only with is_mixed_chunk)@0.5.23; srt/arg_groups/fields/schedule.py:208-211@0.5.23 "
                   "(--enable-mixed-chunk, default False)")
QUEUE_SOURCE = ("estimate: closed loop of c streams; a request waits half of another's prefill with the "
                "probability that one is in progress (the engine's share of time on prefills)")


@dataclass(frozen=True)
class Serving:
    concurrency: int
    ttft_isolated_s: float
    ttft_loaded_s: float
    itl_s: float                 # mean time between output tokens of one stream under the load
    output_tok_s: float          # all streams
    derivations: dict[str, Derived]

    def to_json(self) -> dict:
        return {"concurrency": self.concurrency, "ttft_isolated_s": _r(self.ttft_isolated_s),
                "ttft_loaded_s": _r(self.ttft_loaded_s), "itl_s": _r(self.itl_s),
                "output_tok_s": _r(self.output_tok_s), "per_stream_tok_s": _r(self.output_tok_s / self.concurrency)}


def _r(v: float) -> float:
    return float(f"{v:.5g}")


def serve(ctx, s, prompt: int, output: int, concurrency: int, context: float) -> Serving:
    """TTFT alone and at ``concurrency`` streams, and the output rate the server delivers there, for
    requests of ``prompt`` + ``output`` tokens (settings ``s`` of the plan context ``ctx``)."""
    o = ctx.engine.overhead
    req = float(o.get("request_overhead_ms", 0.0)) * 1e-3
    req_src = o.get("request_source", "")
    c = max(1, concurrency)
    pf = ctx.prefill(s, prompt)
    iso = req + pf.seconds
    d_iso = Derived(iso, "s", "request overhead + prefill (chunks of the engine's size, each a step with its "
                    "fixed costs)", {"request_overhead_s": req, "prefill_s": pf.seconds, "P": prompt,
                                     "chunk": s.chunked_prefill, "chunks": pf.chunks},
                    f"request overhead: {req_src}; prefill: {pf.derived.source}")
    dec = ctx.decode(s, c, context)
    if c == 1:
        itl = dec.seconds
        out = output / (iso + (output - 1) * itl) if output > 0 else 0.0
        d_load = Derived(iso, "s", "one stream: the isolated TTFT", {"c": 1}, d_iso.source)
        d_rate = Derived(out, "tok/s", "O / (TTFT + (O - 1) x t_step(1))", {"O": output, "ttft_s": iso,
                                                                            "t_step": itl}, dec.derived.source)
        return Serving(1, iso, iso, itl, out, {"ttft_isolated": d_iso, "ttft_loaded": d_load,
                                               "served_output_tok_s": d_rate})
    if not o.get("prefill_mixes_decode", True):
        return _serve_separate(s, prompt, output, c, req, req_src, pf, d_iso, dec)
    budget = max(1, s.chunked_prefill - (c - 1))      # running decodes take their tokens first
    mixed = ctx.prefill(replace(s, chunked_prefill=budget), prompt)   # the prompt in what the budget leaves
    n = mixed.chunks
    # each mixed step also carries the c - 1 decodes: their attention and what a decode step of c - 1
    # sequences costs beyond one of a single sequence (the weights are read once for all)
    ride = max(0.0, ctx.decode(s, c - 1, context).seconds - ctx.decode(s, 1, context).seconds)
    t_mixed = mixed.seconds / n + ride
    t_pf = n * t_mixed
    pure = max(0.0, output - n * (c - 1))
    cycle = c * t_pf + pure * dec.seconds              # every stream finishes one request per cycle
    out = c * output / cycle if cycle > 0 else 0.0
    rho = min(1.0, (c - 1) * t_pf / cycle) if cycle > 0 else 1.0
    wait = rho * t_pf / 2.0
    loaded = req + wait + t_pf
    d_load = Derived(loaded, "s", "request overhead + rho x T_prefill/2 (queueing) + n x t_mixed",
                     {"c": c, "request_overhead_s": req, "rho": rho, "queue_s": wait, "n_mixed_steps": n,
                      "prefill_tokens_per_step": budget, "t_mixed_step": t_mixed, "T_prefill": t_pf},
                     f"{SCHEDULE_SOURCE}; queueing: {QUEUE_SOURCE}; request overhead: {req_src}; "
                     f"prefill steps: {mixed.derived.source}")
    d_rate = Derived(out, "tok/s", "c x O / (c x n x t_mixed + max(0, O - n (c - 1)) x t_step(c))",
                     {"c": c, "O": output, "n_mixed_steps": n, "t_mixed_step": t_mixed, "t_step": dec.seconds},
                     f"{SCHEDULE_SOURCE}; steps: {dec.derived.source}")
    itl = max(cycle - loaded, 0.0) / max(output - 1, 1)
    return Serving(c, iso, loaded, itl, out, {"ttft_isolated": d_iso, "ttft_loaded": d_load,
                                              "served_output_tok_s": d_rate})


def _serve_separate(s, prompt: int, output: int, c: int, req: float, req_src: str, pf, d_iso: Derived,
                    dec) -> Serving:
    """Prefill in steps of its own (no decode rides them): each of the c requests of a cycle stalls the
    running decodes for its whole prefill, and each stream then needs O decode steps of batch c."""
    t_pf = pf.seconds
    cycle = c * t_pf + output * dec.seconds
    out = c * output / cycle if cycle > 0 else 0.0
    rho = min(1.0, (c - 1) * t_pf / cycle) if cycle > 0 else 1.0
    wait = rho * t_pf / 2.0
    loaded = req + wait + t_pf
    src = f"{SEPARATE_SOURCE}; queueing: {QUEUE_SOURCE}; request overhead: {req_src}; prefill steps: " \
          f"{pf.derived.source}; estimate: one prompt per prefill step (a closed loop of c streams " \
          f"frees about c / O of them per decode step)"
    d_load = Derived(loaded, "s", "request overhead + rho x T_prefill/2 (queueing) + T_prefill (prefill-only "
                     "steps, decodes wait)",
                     {"c": c, "request_overhead_s": req, "rho": rho, "queue_s": wait, "n_prefill_steps": pf.chunks,
                      "prefill_tokens_per_step": min(s.chunked_prefill, prompt), "T_prefill": t_pf,
                      "mixed": False}, src)
    d_rate = Derived(out, "tok/s", "c x O / (c x T_prefill + O x t_step(c))",
                     {"c": c, "O": output, "T_prefill": t_pf, "t_step": dec.seconds, "mixed": False},
                     f"{SEPARATE_SOURCE}; steps: {dec.derived.source}")
    itl = max(cycle - loaded, 0.0) / max(output - 1, 1)
    return Serving(c, d_iso.value, loaded, itl, out, {"ttft_isolated": d_iso, "ttft_loaded": d_load,
                                                      "served_output_tok_s": d_rate})
