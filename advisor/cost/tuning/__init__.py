"""Serve-settings tuner: for a workload profile, choose TP, KV dtype, memory share, chunked-prefill
size, max batch and draft tokens from the cost model, and keep every option it weighed.

Rules (in this order, each a function of ``knobs`` recording its trade-off rows):
  TP         the most GPUs that pay: a larger TP must beat the smaller one by 10 % on the objective
  KV dtype   only dtypes `explain` accepts; must fit the workload's context x concurrency; among
             those within 3 % of the best objective: the checkpoint's own calibrated KV dtype if it
             declares one (what it was validated with, and what 'auto' runs), else the most KV bits
             (quantized KV costs accuracy). 16-bit KV is FP16 on GPUs without BF16.
  share      the engine default; raised (<= 0.95) only when the context would not fit otherwise and
             does at the raised share (SGLang too: its activations must still fit outside the share)
  chunked    the smallest chunk whose prefill time is within 5 % of the fastest (a chunk stalls the
             other streams' decode while it runs and its activations come out of the KV pool)
  max batch  latency/context: the workload's concurrency; throughput: the smallest batch (at most the
             workload's concurrency) within 3 % of the best aggregate that keeps the per-stream floor and
             fits the context, each batch at the draft count that pays there (speculation under
             concurrency, advisor.cost.spec_concurrency: none once verifying b x (k+1) rows stops paying);
             never more requests than the pool holds with their KV and, for GDN/Mamba layers, their
             per-request recurrent state (rechecked after draft tokens add state slots)
  draft k    the k with the best speedup at the chosen batch, each k costed as its speculative step at
             that batch (verify at M = b x (k+1), the draft's pass over its rows, the state copy); 0 when
             none gains 5 %; for GDN/Mamba models only among the k whose extra state slots keep the
             workload's context fitting
  context    capped (max_model_len) only when one request at the model's maximum context does not fit:
             at the workload's context if it fits, else at the largest that does

Modules: ``steps`` (Option, Tuning, one Step per knob), ``fit`` (starting settings, fit, objective),
``knobs`` (one function per knob), ``notes`` (their plain-words notes), ``tuner`` (tune, composing them).
"""

from advisor.cost.tuning.fit import decode_context, effective_workload
from advisor.cost.tuning.knobs import max_model_len
from advisor.cost.tuning.steps import Option, Tuning
from advisor.cost.tuning.tuner import tune

__all__ = ["Option", "Tuning", "decode_context", "effective_workload", "max_model_len", "tune"]
