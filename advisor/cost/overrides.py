"""What-if overrides and settings the user already fixed (CLI flags, TUI fields)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Overrides:
    vram_gb: float | None = None          # modded cards (22 GB RTX 2080 Ti): GiB of VRAM per GPU
    power_limit_w: float | None = None    # the card's set power limit
    bandwidth_gbs: float | None = None    # e.g. memory overclock / downclock
    kv_cache_dtype: str | None = None     # engine flag value, fixed by the user
    max_batch: int | None = None
    memory_share: float | None = None
    chunked_prefill: int | None = None
    tp: int | None = None
    draft_tokens: int | None = None       # fixed k (0 disables speculation)
    spec_method: str | None = None        # mtp | eagle | eagle3 | dflash | ngram | draft_model
    acceptance: tuple[float, ...] | None = None   # per-position acceptance, overrides the method default
    acceptance_kind: str | None = None    # unconditional | conditional (None: what the engine prints)
    chat_template: str | None = None      # the template --acceptance was measured with (launch passes it on)
    draft_bytes: float | None = None      # bytes a draft pass reads (draft_model / eagle)
    cuda_graphs: bool | None = None
    host_overlap: bool | None = None      # the engine schedules step n+1 while the GPU runs step n (vLLM
                                          # --async-scheduling, SGLang's overlap scheduler); None: its default
    context_tokens: int | None = None     # the context C to cost decode at
    prompt_tokens: int | None = None
    pcie_gen: int | None = None
    pcie_lanes: int | None = None
    nvlink: bool | None = None            # the GPUs are NVLink-bridged (probed topology or --nvlink); None: guess
