"""What to launch: one frozen, engine-neutral record that every command generator reads.

Built at the edge (CLI flags, a saved profile, or a plan via ``settings_from_plan``). The API key
is the only secret; it is kept out of ``repr`` and out of saved profiles.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from advisor.redact import REDACTED  # one spelling for every redaction

# Speculative methods the generators understand (engine-specific spellings are mapped there).
SPEC_METHODS = ("mtp", "eagle", "eagle3", "dflash", "dspark", "ngram", "draft_model")

# Engine-neutral KV cache dtypes accepted by ServeSettings.kv_cache_dtype.
KV_DTYPES = ("auto", "bf16", "fp16", "fp8_e4m3", "fp8_e5m2", "nvfp4", "q8_0", "q4_0")


@dataclass(frozen=True)
class Speculative:
    method: str                      # one of SPEC_METHODS
    draft_tokens: int                # tokens drafted per step, NOT counting the anchor token
    draft_model: str | None = None   # path of the draft checkpoint (None for mtp heads / ngram)


@dataclass(frozen=True)
class ServeSettings:
    engine: str                                  # an advisor.engines name (launchable())
    model: str                                   # checkpoint directory (or GGUF file for llama.cpp)
    version: str | None = None                   # engine version to target; None = detect / reference
    host: str = "127.0.0.1"
    port: int = 8000
    served_model_name: str | None = None
    tp: int = 1
    pp: int = 1
    nodes: int = 1
    head_address: str | None = None              # multi-node: IP of the Ray head node
    kv_cache_dtype: str = "auto"                 # one of KV_DTYPES
    max_batch: int | None = None                 # concurrent sequences
    max_model_len: int | None = None
    max_batched_tokens: int | None = None
    memory_share: float | None = None            # fraction of GPU memory the engine may take
    chunked_prefill: int | None = None           # chunk size in tokens; 0 = disabled; None = engine default
    speculative: Speculative | None = None
    linear_backend: str | None = None            # vLLM --linear-backend / SGLang --fp4-gemm-backend
    moe_backend: str | None = None               # vLLM --moe-backend / SGLang --moe-runner-backend
    api_key: str | None = field(default=None, repr=False)
    cuda_graphs: bool = True
    host_overlap: bool | None = None             # False: vLLM --no-async-scheduling / SGLang --disable-overlap-schedule
    prefix_caching: bool | None = None           # None = engine default
    chat_template: str | None = None             # a chat template file passed to the engine
    cuda_devices: tuple[int, ...] = ()           # CUDA_VISIBLE_DEVICES; () = leave as is
    device: str | None = None                    # transformers serve: "cpu" / "cuda"
    weight_dtype: str | None = None              # engine --dtype override (FastLLM: fp8, int4g128, ...)
    checkpoint_scheme: str | None = None         # e.g. BF16, W4A4-NVFP4: drives warnings only
    checkpoint_moe: bool = False                 # the checkpoint has routed experts: drives warnings only
    extra_args: tuple[str, ...] = ()
    extra_env: tuple[tuple[str, str], ...] = ()

    @property
    def base_url(self) -> str:
        host = "127.0.0.1" if self.host in ("0.0.0.0", "", "::") else self.host
        return f"http://{host}:{self.port}"

    @property
    def model_id(self) -> str:
        return self.served_model_name or self.model

    def secrets(self) -> tuple[str, ...]:
        """The API key and values after a secret flag in --extra-arg (--api-key=X, --hf-token X)."""
        from advisor.redact import argv_secrets

        return ((self.api_key,) if self.api_key else ()) + argv_secrets(self.extra_args or ())

    def to_json(self) -> dict:
        """JSON form (advisor.jsonout): the API key never leaves as plain text."""
        from dataclasses import fields

        d = {f.name: getattr(self, f.name) for f in fields(self)}
        d["api_key"] = REDACTED if self.api_key else None
        if self.extra_args:
            from advisor.redact import redact_argv

            d["extra_args"] = redact_argv(self.extra_args, self.secrets())
        return d

    def redacted(self) -> "ServeSettings":
        return replace(self, api_key=REDACTED) if self.api_key else self


def _get(obj, name, default=None):
    return obj.get(name, default) if isinstance(obj, dict) else getattr(obj, name, default)


def settings_from_plan(plan, *, engine: str, model: str, **overrides) -> ServeSettings:
    """ServeSettings from an ``advisor.cost.plan_records.Plan`` (or its ``to_json()`` dict): the recommendation's
    KV dtype (engine spelling), max batch, context cap (max model len), memory share, chunked prefill,
    TP, CUDA graphs and speculative method / draft tokens, and what its figures assumed besides (environment such
    as FASTLLM_DRAFT_QUANT, prefix caching, the chat template). ``overrides`` win (model path, port, draft
    model, ...)."""
    rec = _get(plan, "recommendation", plan)
    draft = _get(rec, "draft_tokens") or 0
    method = _get(rec, "speculative_method")
    spec = None
    if draft and method:
        m = str(method).lower()
        m = "mtp" if m.endswith("mtp") or m == "nextn" else m
        spec = Speculative(method=m, draft_tokens=int(draft), draft_model=overrides.pop("draft_model", None))
    chunked = _get(rec, "chunked_prefill")
    values = dict(
        engine=engine, model=model,
        kv_cache_dtype=_get(rec, "kv_cache_dtype") or "auto",
        max_batch=_get(rec, "max_batch"),
        max_model_len=_get(rec, "max_model_len"),
        memory_share=_get(rec, "memory_share"),
        chunked_prefill=None if chunked is None or chunked < 0 else int(chunked),
        tp=_get(rec, "tp") or 1,
        cuda_graphs=bool(_get(rec, "cuda_graphs", True)),
        host_overlap=_get(rec, "host_overlap"),
        speculative=spec,
        prefix_caching=_get(rec, "prefix_caching"),
        chat_template=_get(rec, "chat_template"),
        extra_env=tuple((str(k), str(v)) for k, v in (_get(rec, "env") or {}).items()),
    )
    overrides.pop("draft_model", None)
    values.update(overrides)
    return ServeSettings(**values)


def predicted_kv_tokens(plan) -> int | None:
    """The plan's KV pool (tokens) for the KV dtype it recommends."""
    preds = _get(plan, "predictions")
    rec = _get(plan, "recommendation")
    pools = _get(preds, "kv_pool_tokens") if preds is not None else None
    if not pools or rec is None:
        return None
    state = _get(preds, "recurrent_state")
    if state is not None and _get(state, "pool") == "shared":
        # vLLM logs max concurrency at max_model_len x max_model_len (kv_cache_utils.py:1120-1153@0.33.0):
        # with per-request recurrent state that is not a count of KV tokens, so there is nothing to compare.
        return None
    v = pools.get(_get(rec, "kv_cache_dtype"))
    return int(v) if isinstance(v, (int, float)) else None
