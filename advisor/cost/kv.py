"""KV-cache bytes per token and per request, per KV dtype, for the layers that really keep KV.

bytes/token/layer = 2 (K and V) x kv_heads x head_dim x bits/8 (+ per-token-head scales);
MLA keeps one latent of (kv_lora_rank + qk_rope_head_dim) values instead of K and V.
Hybrid models count only their full-attention layers; sliding-window layers hold at most
``sliding_window`` tokens; linear-attention (GDN/Mamba) layers keep a fixed per-request state, not KV
(advisor/cost/recurrent_state.py counts it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from advisor.checkpoint.model import ArchInfo


@dataclass(frozen=True)
class KvDtype:
    """One value of an engine's KV-cache dtype flag."""

    name: str                   # the engine's flag value, e.g. "fp8_e4m3"
    kind: str                   # bf16 | fp16 | fp8 | nvfp4 | int8 | int4 | fp4_mx | mxfp8
    bits: float                 # bits per stored value incl. block scales (nvfp4: 4 + 8/16 = 4.5)
    scale_bytes_per_head: float = 0.0   # per-token-head scales (per K and per V)
    source: str = ""


@dataclass(frozen=True)
class KvLayout:
    full_layers: int
    window_layers: int
    window: int | None
    linear_layers: int
    values_per_layer_token: float   # K+V values (or MLA latent) per token per layer, per GPU
    heads_per_gpu: float            # for per-token-head scales (K and V)
    mla: bool
    context_limit: int | None
    note: str
    draft_layers: int = 0           # MTP draft layers' KV in the same pool (counted in full_layers)
    # None: window layers hold at most the window per request (vLLM). A number: the pool is split into a
    # full-layer part and a window-layer part holding swa_ratio x as many tokens (SGLang)
    swa_ratio: float | None = None
    # per-layer KV geometry (ArchInfo.kv_groups): window layers with their own heads x head size;
    # None = the same values_per_layer_token / heads_per_gpu as the full layers
    window_values_per_layer_token: float | None = None
    window_heads_per_gpu: float | None = None

    def _split(self) -> tuple[float, int] | None:
        """(swa_ratio, window) where the pool is split into a full-layer and a window-layer part."""
        if self.swa_ratio is None or not self.full_layers or not self.window_layers or self.window is None:
            return None
        return self.swa_ratio, self.window

    def bytes_per_token_layer(self, dt: KvDtype, window: bool = False) -> float:
        vals, heads = self.values_per_layer_token, self.heads_per_gpu
        if window and self.window_values_per_layer_token is not None:
            vals, heads = self.window_values_per_layer_token, self.window_heads_per_gpu or 0.0
        scales = 0.0 if self.mla else 2.0 * heads * dt.scale_bytes_per_head
        return vals * dt.bits / 8.0 + scales

    def _window_factor(self, dt: KvDtype) -> float:
        """Window-layer bytes per token relative to a full layer's (1 unless their geometry differs)."""
        full = self.bytes_per_token_layer(dt)
        return self.bytes_per_token_layer(dt, window=True) / full if full > 0 else 1.0

    def bytes_per_token(self, dt: KvDtype) -> float:
        """Per GPU, one more token of context in every KV layer (window layers while below the window)."""
        if not self.full_layers:
            return self.window_layers * self.bytes_per_token_layer(dt, window=True)
        layers: float = self.full_layers
        split = self._split()
        if split is not None:    # each full-layer token brings swa_ratio window-layer tokens
            layers = self.full_layers + split[0] * self.window_layers * self._window_factor(dt)
        return layers * self.bytes_per_token_layer(dt)

    def request_bytes(self, dt: KvDtype, context: float) -> float:
        """KV bytes one request of ``context`` tokens holds (and a decode step reads), per GPU."""
        per = self.bytes_per_token_layer(dt)
        win = context if self.window is None else min(context, self.window)
        return per * self.full_layers * context + self.bytes_per_token_layer(dt, window=True) * self.window_layers * win

    def max_context(self, dt: KvDtype, pool_bytes: float, batch: int) -> float:
        """Longest context each of ``batch`` concurrent requests can hold in ``pool_bytes``."""
        if batch <= 0 or pool_bytes <= 0:
            return 0.0
        per = self.bytes_per_token_layer(dt)
        per_w = self.bytes_per_token_layer(dt, window=True)
        share = pool_bytes / batch
        layers = self.full_layers + self.window_layers * (per_w / per if per > 0 else 1.0)
        split = self._split()
        if split is not None and per > 0:
            full, swa = self._split_tokens(dt, pool_bytes, split[0])
            # past the window each request keeps only the window in the SWA part
            c = full / batch if batch * split[1] <= swa else swa / batch
            if self.context_limit is not None:
                c = min(c, float(self.context_limit))
            return max(0.0, c)
        if per <= 0 or layers == 0:
            c = math.inf
        else:
            c = share / (per * layers)
            if self.window is not None and self.window_layers and c > self.window:
                rest = share - per_w * self.window_layers * self.window
                c = rest / (per * self.full_layers) if self.full_layers else math.inf
        if self.context_limit is not None:
            c = min(c, float(self.context_limit))
        return max(0.0, c)

    def _split_tokens(self, dt: KvDtype, pool_bytes: float, swa_ratio: float) -> tuple[float, float]:
        """Split pool: (full-layer tokens, window-layer tokens) it holds."""
        full = max(pool_bytes, 0.0) / self.bytes_per_token(dt)
        return full, full * swa_ratio

    def max_concurrency(self, dt: KvDtype, pool_bytes: float, context: float) -> int:
        split = self._split()
        if split is not None and self.bytes_per_token_layer(dt) > 0 and context > 0:
            full, swa = self._split_tokens(dt, pool_bytes, split[0])
            return int(min(full // context, swa // min(context, split[1])))
        need = self.request_bytes(dt, context)
        return int(pool_bytes // need) if need > 0 else 0


def layout(arch: ArchInfo, tp: int = 1, draft_layers: int = 0, swa_ratio: float | None = None) -> KvLayout:
    """``draft_layers``: MTP draft layers that run (each keeps full-context KV in the same pool);
    ``swa_ratio``: the engine splits its pool between full and window layers at this token ratio."""
    linear = arch.linear_attention_layers
    window_layers = arch.sliding_window_layers if arch.sliding_window else 0
    full = (arch.kv_layers or max(0, arch.num_layers - linear - window_layers)) + draft_layers
    notes = []
    if draft_layers:
        notes.append(f"{draft_layers} MTP draft layer(s) keep their own KV in the same pool")
    if swa_ratio is not None and window_layers and full:
        notes.append(f"pool split: window layers hold {swa_ratio:g} x the full layers' tokens")
    if linear:
        notes.append(f"{linear} linear-attention layers keep a fixed per-request state, not KV "
                     "(counted as recurrent state)")
    window_vals = window_heads = None
    if arch.mla is None and arch.kv_groups:
        # layers differ in KV heads / head size (Gemma 4 global vs sliding, Nemotron-NAS blocks): the full
        # layers' values are their average, the window layers keep their own
        def per_gpu(g):
            return g.kv_heads / tp if g.kv_heads >= tp else 1.0

        fulls = [g for g in arch.kv_groups if not g.sliding]
        wins = [g for g in arch.kv_groups if g.sliding]
        nf, nw = sum(g.layers for g in fulls), sum(g.layers for g in wins)
        notes.append("per-layer KV: " + ", ".join(
            f"{g.layers} {'sliding' if g.sliding else 'full'} x {g.kv_heads} KV heads x {g.head_dim}"
            for g in arch.kv_groups))
        if nw and window_layers:
            window_heads = sum(per_gpu(g) * g.layers for g in wins) / nw
            window_vals = sum(2.0 * per_gpu(g) * g.head_dim * g.layers for g in wins) / nw
        if nf:
            heads = sum(per_gpu(g) * g.layers for g in fulls) / nf
            vals = sum(2.0 * per_gpu(g) * g.head_dim * g.layers for g in fulls) / nf
            return KvLayout(full, window_layers, arch.sliding_window, linear, vals, heads, False,
                            arch.max_position_embeddings, "; ".join(notes), draft_layers,
                            swa_ratio if window_layers and full else None, window_vals, window_heads)
    if arch.mla is not None:
        # MLA's latent is shared by all heads and replicated on every TP rank.
        vals = float(arch.mla.kv_lora_rank + arch.mla.qk_rope_head_dim)
        heads = 0.0
        notes.append("MLA: one latent (kv_lora_rank + qk_rope_head_dim) per token, replicated per TP rank")
    else:
        # arch_info resolves an absent KV-heads key to the attention heads: 0 here means invalid/unknown
        kvh = arch.num_kv_heads
        heads_q = arch.num_attention_heads
        head_dim = arch.head_dim or (arch.hidden_size // heads_q if heads_q > 0 else 0)
        if kvh <= 0 or head_dim <= 0:
            heads, vals = 0.0, 0.0               # unknown: KV figures become N/A, never a made-up pool
            notes.append("KV heads or head size unknown (see inspect's findings): KV figures are N/A")
        else:
            heads = kvh / tp if kvh >= tp else 1.0   # fewer KV heads than ranks: each rank keeps a copy
            vals = 2.0 * heads * head_dim
    return KvLayout(full, window_layers, arch.sliding_window, linear, vals, heads,
                    arch.mla is not None, arch.max_position_embeddings, "; ".join(notes), draft_layers,
                    swa_ratio if window_layers and full else None, window_vals, window_heads)
