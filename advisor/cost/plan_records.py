"""The plan's records: what `plan` predicts (speed, speculation, per-request state), what it recommends, and
the Plan itself: frozen, every number with its derivation (advisor.cost.plan makes them)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from advisor.cost.derived import Assumption, Derived
from advisor.cost.serving import Serving
from advisor.cost.spec_concurrency import SpecCurve
from advisor.cost.tuning import Option
from advisor.cost.workload import Workload


def _r(v: float | None) -> float | None:
    return None if v is None else float(f"{v:.5g}")

@dataclass(frozen=True)
class SpecPrediction:
    method: str | None
    note: str
    per_k: tuple[dict[str, float], ...]     # k, expected_tokens_per_step, speedup, step_seconds
    chosen_k: int
    batch: int
    curve: SpecCurve | None = None           # per batch: plain against speculative decoding


@dataclass(frozen=True)
class StatePrediction:
    """The linear-attention layers' per-request state (GDN/Mamba), per GPU."""

    kind: str                    # gdn | kda | mamba2 | mamba1
    layers: int
    bytes_per_request: float     # memory one running request holds for it
    step_bytes_per_request: float  # what one decode step loads and stores of it
    slots: int                   # states held per request per layer
    conv_dtype: str
    ssm_dtype: str
    pool: str                    # shared (taken from the KV pool) | split (own pool, SGLang)
    kv_block_tokens: int         # attention block raised to hold one state page (1: unchanged)
    state_pool_bytes: float      # split: the state pool; shared: states of max-batch requests
    max_requests: int | None     # split: running requests the state pool allows

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "layers": self.layers, "bytes_per_request": _r(self.bytes_per_request),
                "mib_per_request": _r(self.bytes_per_request / 2**20),
                "step_bytes_per_request": _r(self.step_bytes_per_request), "slots": self.slots,
                "conv_dtype": self.conv_dtype, "ssm_dtype": self.ssm_dtype, "pool": self.pool,
                "kv_block_tokens": self.kv_block_tokens, "state_pool_bytes": _r(self.state_pool_bytes),
                "max_requests": self.max_requests}


@dataclass(frozen=True)
class Predictions:
    decode_tok_s: float | None              # None: N/A, the reason in ``na``
    decode_aggregate_tok_s: dict[int, float]
    prefill_tok_s: float | None
    prefill_seconds: float | None
    kv_pool_tokens: dict[str, int]
    max_context_per_request: int
    max_concurrency_at_context: int
    bound: str
    crossover_batch: int | None
    speculative: SpecPrediction
    decode_context_tokens: int
    weights_gib_per_gpu: float
    recurrent_state: StatePrediction | None = None
    na: dict[str, str] = field(default_factory=dict)   # figure -> why it is N/A (its value is None/empty)
    upper_bound: str = ""          # non-empty: the speeds are upper bounds, and why
    crossover_limit: int | None = None   # the crossover search stopped at the batch the pool holds
    serving: Serving | None = None       # TTFT alone and under the workload's load, served output rate


@dataclass(frozen=True)
class Recommendation:
    kv_cache_dtype: str
    max_batch: int
    draft_tokens: int
    memory_share: float
    chunked_prefill: int
    tp: int
    cuda_graphs: bool
    speculative_method: str | None
    flags: dict[str, str]                    # engine flag -> value ({} when ``blocked``)
    blocked: str = ""                        # non-empty: why no launch line is recommended
    max_model_len: int | None = None         # context cap to pass (None: the model's maximum fits)
    # what the figures assumed beyond the flags above, so `launch --plan` sets it too
    env: dict[str, str] = field(default_factory=dict)   # e.g. FASTLLM_DRAFT_QUANT=nvfp4_head
    prefix_caching: bool | None = None       # the memory model assumed it on (engine default made explicit)
    chat_template: str | None = None         # the template --acceptance was measured with
    host_overlap: bool | None = None         # the plan was costed with the engine's overlap set so (None: default)


@dataclass(frozen=True)
class Plan:
    checkpoint: str
    checkpoint_label: str
    gpu_id: str
    gpu_name: str
    gpus: int
    engine: str
    engine_version: str
    workload: Workload
    predictions: Predictions
    recommendation: Recommendation
    tradeoffs: tuple[Option, ...]
    assumptions: tuple[Assumption, ...]
    warnings: tuple[str, ...]
    derivations: dict[str, Derived] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        p = self.predictions
        return {
            "checkpoint": self.checkpoint, "checkpoint_label": self.checkpoint_label,
            "gpu": {"id": self.gpu_id, "name": self.gpu_name, "count": self.gpus},
            "engine": {"name": self.engine, "version": self.engine_version},
            "workload": self.workload,
            "predictions": {
                "decode_tok_s": _r(p.decode_tok_s),
                "decode_aggregate_tok_s": {str(k): _r(v) for k, v in p.decode_aggregate_tok_s.items()},
                "prefill_tok_s": _r(p.prefill_tok_s),
                "prefill_seconds": _r(p.prefill_seconds),
                "kv_pool_tokens": p.kv_pool_tokens,
                "max_context_per_request": p.max_context_per_request,
                "max_concurrency_at_context": p.max_concurrency_at_context,
                "bound": p.bound,
                "crossover_batch": p.crossover_batch,
                "decode_context_tokens": p.decode_context_tokens,
                "weights_gib_per_gpu": _r(p.weights_gib_per_gpu),
                "recurrent_state": p.recurrent_state.to_json() if p.recurrent_state else None,
                "na": dict(p.na), "upper_bound": p.upper_bound or None, "crossover_limit": p.crossover_limit,
                "serving": p.serving.to_json() if p.serving is not None else None,
                "speculative": {
                    "method": p.speculative.method, "note": p.speculative.note, "batch": p.speculative.batch,
                    "chosen_k": p.speculative.chosen_k,
                    "per_k": {str(int(d["k"])): {kk: _r(vv) for kk, vv in d.items() if kk != "k"}
                              for d in p.speculative.per_k},
                    "curve": p.speculative.curve.to_json() if p.speculative.curve is not None else None,
                },
            },
            "recommendation": self.recommendation,
            "tradeoffs": self.tradeoffs,
            "assumptions": self.assumptions,
            "derivations": self.derivations,
            "warnings": list(self.warnings),
        }
