"""Everything one plan evaluates settings against, built once from the frozen inputs."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from advisor.arch_caps import caps_for
from advisor.checkpoint.model import CheckpointInfo
from advisor.cost import (
    efficiency,
    gpu_efficiency,
    interconnect,
    measured as measured_ops,
    memory,
    spec_choice,
    speculative,
    weights,
)
from advisor.cost.derived import Assumption, Derived
from advisor.cost.engine_profile import GIB, EngineMemory
from advisor.cost.kv import KvDtype, KvLayout
from advisor.cost.kv_choice import allowed_kv, kv_decision, one_16bit_kv
from advisor.cost.overrides import Overrides
from advisor.cost.recurrent_state import RecurrentState
from advisor.cost.roofline import CostModel
from advisor.cost.step_costs import PrefillCost, StepCost
from advisor.engines import flags as engine_flags
from advisor.errors import AdvisorError, BadInput, UsageError
from advisor.gpu_spec import GpuSpec
from advisor.kernel_path.model import Explanation, LayerDecision

POWER_EXPONENT = (1 / 3, "inferred: dynamic power ~ f x V^2 with V ~ f, so clock ~ (limit/TDP)^(1/3); "
                  "gives 7 % at 280 W on a 350 W RTX 3090 against 6-15 % measured (field-notes §3)")


@dataclass(frozen=True)
class Settings:
    kv: KvDtype
    max_batch: int
    memory_share: float
    chunked_prefill: int
    tp: int
    draft_tokens: int
    cuda_graphs: bool


@dataclass(frozen=True)
class PlanContext:
    checkpoint: CheckpointInfo
    explanation: Explanation
    gpu: GpuSpec
    gpus: int
    engine: EngineMemory
    model: CostModel
    vram_bytes: float
    allowed_kv: tuple[KvDtype, ...]
    rejected_kv: dict[str, str]
    default_kv: KvDtype
    spec_method: speculative.SpecMethod | None
    acceptance: tuple[float, ...]
    overrides: Overrides
    dequant_overhead: dict[str, float]
    assumptions: tuple[Assumption, ...]
    warnings: tuple[str, ...]
    spec_note: str = ""
    spec_auto: bool = True          # False: the method is shown, not recommended (implicit n-gram)
    _cache: dict = field(default_factory=dict, compare=False, repr=False)
    # TP size -> layer classes its explained path runs on the CPU (feasibility.cpu_layers); a TP size
    # not listed is taken to run on the GPU
    cpu_layers_at_tp: dict = field(default_factory=dict, compare=False)

    # ---------------------------------------------------------------- memory
    def weight_bytes(self, tp: int) -> float:
        """Weights per GPU as the engine holds them resident (its in-memory layout; no draft)."""
        x = memory.MemoryInputs(self.checkpoint.arch, self.model.weights, self.vram_bytes, 1.0, tp, 1, 1, False)
        return memory.resident_weights(self.engine, x)

    def batch_default(self) -> dict:
        return self.engine.batch_default(self.vram_bytes / GIB, self.gpu.id)

    def default_share(self, chunked: int, max_batch: int, tp: int, graphs: bool) -> Derived:
        return memory.default_share(self.engine, self.vram_bytes, chunked, max_batch, tp, graphs)

    def spec_memory(self, s: Settings) -> memory.SpecMemory | None:
        """What drafting adds to memory at this setting: a separate draft, a quantized head copy, and
        the linear-attention state snapshots verification keeps (one request's state, per GPU)."""
        m = self.spec_method
        if m is None or not s.draft_tokens:
            return None
        nbytes, src = self.draft_weights()
        head, head_src = (self.draft_head_copy_bytes(), self.engine.draft_quant.get("source", "")) \
            if self.draft_head_quant() else (0.0, "")
        st = self.recurrent(s)
        return memory.SpecMemory(m.name, s.draft_tokens, nbytes, src, head, head_src,
                                 st.state_bytes if st is not None else 0.0)

    def memory_inputs(self, s: Settings) -> memory.MemoryInputs:
        return memory.MemoryInputs(self.checkpoint.arch, self.model.weights, self.vram_bytes, s.memory_share, s.tp,
                                   s.chunked_prefill, s.max_batch, s.cuda_graphs, tuple(self.gpu.cc or (0, 0)),
                                   self.spec_memory(s), self.kv_layout(s).full_layers)

    def budget(self, s: Settings) -> memory.MemoryBudget:
        key = ("budget", s)
        if key not in self._cache:
            self._cache[key] = memory.budget(self.engine, self.memory_inputs(s))
        return self._cache[key]

    def recurrent(self, s: Settings, kv: KvDtype | None = None) -> RecurrentState | None:
        """Per-request GDN/Mamba state at this setting (None: the model keeps none)."""
        kv = kv or s.kv
        key = ("state", s.tp, kv.name, s.draft_tokens)
        if key not in self._cache:
            archs = self.checkpoint.arch.architectures
            self._cache[key] = self.model.recurrent(s.tp, kv, s.draft_tokens, self.gpu.cc,
                                                    archs[0] if archs else "")
        return self._cache[key]

    def kv_layout(self, s: Settings) -> KvLayout:
        """The KV layers of this setting: the target's, plus the MTP draft layers when MTP drafts (the
        engine keeps their KV in the same pool, ``engine.draft_kv_source``)."""
        m = self.spec_method
        draft = 0
        if m is not None and s.draft_tokens:
            # a separate draft's attention layers (EAGLE: one, DFlash: five, speculative.METHODS) keep KV too
            draft = self.checkpoint.arch.mtp_layers if m.draft == "mtp_head" else \
                m.draft_layers if m.draft == "layers" else 0
        return self.model.kv_layout(s.tp, draft)

    def kv_pool_bytes(self, s: Settings, batch: int, kv: KvDtype | None = None) -> float:
        """What the KV cache can use once ``batch`` requests hold their recurrent state (per GPU)."""
        pool = max(self.budget(s).pool_bytes.value, 0.0)
        st = self.recurrent(s, kv)
        if st is None:
            return pool
        if st.pool == "split":
            return max(pool - st.split_reserve(pool, s.max_batch)[0], 0.0)
        return max(pool - max(batch, 0) * st.request_bytes, 0.0)

    def pool_tokens(self, s: Settings, kv: KvDtype | None = None) -> int:
        kv = kv or s.kv
        pool = self.kv_pool_bytes(s, s.max_batch, kv)
        per = self.kv_layout(s).bytes_per_token(kv)
        return int(max(pool, 0.0) // per) if per > 0 else 0

    def max_context(self, s: Settings, batch: int) -> int:
        st = self.recurrent(s)
        if st is not None and st.pool == "split" and batch > self.state_request_cap(s):
            return 0                                    # the state pool cannot run that many requests
        pool = self.kv_pool_bytes(s, batch)
        c = self.kv_layout(s).max_context(s.kv, pool, batch)
        if not math.isfinite(c):
            return int(self.checkpoint.arch.max_position_embeddings or 0)
        if st is not None and st.kv_block_tokens > 1:
            c = c // st.kv_block_tokens * st.kv_block_tokens   # whole attention blocks
        return int(c)

    def max_concurrency(self, s: Settings, context: int) -> int:
        kvl = self.kv_layout(s)
        st = self.recurrent(s)
        if st is None:
            return kvl.max_concurrency(s.kv, max(self.budget(s).pool_bytes.value, 0.0), context)
        if st.pool == "split":
            by_kv = kvl.max_concurrency(s.kv, self.kv_pool_bytes(s, 0), context)
            return min(by_kv, self.state_request_cap(s))
        pool = max(self.budget(s).pool_bytes.value, 0.0)
        block = st.kv_block_tokens
        held = math.ceil(context / block) * block if block > 1 else context   # whole attention blocks
        need = kvl.request_bytes(s.kv, held) + st.request_bytes
        return int(pool // need) if need > 0 else 0

    def state_request_cap(self, s: Settings) -> int:
        """Split state pool (SGLang): running requests its slots allow; no cap for a shared pool."""
        st = self.recurrent(s)
        if st is None or st.pool != "split":
            return 1 << 30
        return st.split_reserve(max(self.budget(s).pool_bytes.value, 0.0), s.max_batch)[1]

    # ---------------------------------------------------------------- speed
    def decode(self, s: Settings, batch: int, context: float, verify_tokens: int = 1) -> StepCost:
        key = ("d", s.kv.name, s.tp, s.cuda_graphs, batch, context, verify_tokens)
        if key not in self._cache:
            self._cache[key] = self.model.decode_step(batch, context, s.kv, tp=s.tp, graphs=s.cuda_graphs,
                                                      verify_tokens=verify_tokens)
        return self._cache[key]

    def prefill(self, s: Settings, prompt: int) -> PrefillCost:
        key = ("p", s.kv.name, s.tp, s.cuda_graphs, s.chunked_prefill, prompt)
        if key not in self._cache:
            self._cache[key] = self.model.prefill(prompt, s.chunked_prefill, s.kv, tp=s.tp, graphs=s.cuda_graphs,
                                                  dequant_overhead=self.dequant_overhead)
        return self._cache[key]

    def draft_weights(self) -> tuple[float, str]:
        """A separate draft's weights as loaded, all GPUs (0: an MTP head of the checkpoint, or no draft)."""
        m = self.spec_method
        if m is None or m.draft in ("none", "mtp_head"):
            return 0.0, ""
        wm = self.model.weights
        if m.draft == "draft_model":
            if self.overrides.draft_bytes:
                return self.overrides.draft_bytes, "--draft-bytes"
            return DRAFT_SHARE * wm.resident_bytes(), speculative.DRAFT_MODEL_SHARE[1]
        n = max(1, m.draft_layers)
        one_layer = wm.params_of("dense") / max(self.checkpoint.arch.num_layers, 1) * 2.0
        return n * one_layer, (f"estimate: {n} 16-bit decoder layer(s) of the target's size (the draft shares "
                               "the target's head)")

    def draft_head_quant(self) -> bool:
        """The engine quantizes the draft's output head (FastLLM FASTLLM_DRAFT_QUANT) and the plan assumes it."""
        q = self.engine.draft_quant
        m = self.spec_method
        return bool(q) and m is not None and m.name in (q.get("methods") or ()) and m.draft != "none"

    def draft_head_copy_bytes(self) -> float:
        arch = self.checkpoint.arch
        return arch.vocab_size * arch.hidden_size * float(self.engine.draft_quant.get("head_bits", 16)) / 8.0

    def memo(self, key: tuple, make):
        """``make()`` once per context and key (the tuner and the plan ask for the same figures)."""
        if key not in self._cache:
            self._cache[key] = make()
        return self._cache[key]


DRAFT_SHARE = speculative.DRAFT_MODEL_SHARE[0]


def has_bf16(gpu: GpuSpec) -> bool:
    """Whether the tensor cores take BF16: a capability of the compute capability (profiles/arch.yaml),
    never inferred from a peak the table does not know (a null peak is 'unknown', not 'absent')."""
    caps = caps_for(gpu.cc)
    if caps.known:
        return caps.has_bf16
    return not gpu.lacks("bf16") and tuple(gpu.cc) >= (8, 0)


def _upper_bound_gpu(gpu: GpuSpec) -> GpuSpec | None:
    """The table entry whose figures bound an entry without published peaks (gpu_efficiency.PEAK_UPPER_BOUND)."""
    ref = gpu_efficiency.PEAK_UPPER_BOUND.get(gpu.id)
    if ref is None:
        return None
    from advisor.gpu_table import get_gpu

    try:
        return get_gpu(ref[0])
    except AdvisorError:
        return None


def _capped_lengths(checkpoint: CheckpointInfo, o: Overrides, warnings: list[str]) -> Overrides:
    """--context / --prompt beyond the model's maximum are capped to it, as the workload's context is."""
    limit = checkpoint.arch.max_position_embeddings
    if not limit:
        return o

    def capped(v: int | None, flag: str) -> int | None:
        if v is not None and v > limit:
            warnings.append(f"{flag} {v:,} exceeds the model's maximum context of {limit:,} tokens: capped to it")
            return limit
        return v

    context, prompt = capped(o.context_tokens, "--context"), capped(o.prompt_tokens, "--prompt")
    if (context, prompt) == (o.context_tokens, o.prompt_tokens):
        return o
    return replace(o, context_tokens=context, prompt_tokens=prompt)


def build(checkpoint: CheckpointInfo, explanation: Explanation, gpu: GpuSpec, *, gpus: int, engine: EngineMemory,
          overrides: Overrides, calibration=None, kv_decisions: dict[str, LayerDecision] | None = None
          ) -> PlanContext:
    if gpus < 1:
        raise BadInput(f"--gpus must be at least 1 (got {gpus})")
    warnings: list[str] = []
    assumptions: list[Assumption] = []
    overrides = _capped_lengths(checkpoint, overrides, warnings)
    wm = weights.build(checkpoint, explanation)
    kv_d = kv_decision(explanation)
    bf16 = has_bf16(gpu)
    attn_mma = kv_d.mma if kv_d is not None and kv_d.mma in efficiency.MMA_PEAK else (
        "hmma_bf16" if bf16 else "hmma_f16")
    mmas = tuple(m for p in wm.parts for m in p.mma_classes) + (attn_mma, "hmma_bf16", "hmma_f16")
    families = tuple(efficiency.family(r.mma, r.dequant) for p in wm.parts for r in (p.ranges or (p.at_m(1),)))
    eff = gpu_efficiency.resolve(gpu, calibration, mmas, bound=_upper_bound_gpu(gpu), families=families)
    assumptions.extend(eff.assumptions)
    if eff.upper_bound:
        warnings.append(eff.upper_bound + ": speeds are upper bounds")
    sixteen = eff.mma_tflops.get("hmma_bf16") or eff.mma_tflops.get("hmma_f16")
    for p in wm.parts:
        for mma in p.mma_classes:
            if mma in eff.mma_tflops or mma == "none":
                continue
            if sixteen:
                warnings.append(f"no tensor peak for {mma} on {gpu.id} in the GPU table: its compute time "
                                "falls back to the BF16/FP16 rate")
            else:
                warnings.append(f"no tensor peak for {mma} on {gpu.id} in the GPU table (nor a BF16/FP16 one): "
                                "speeds that depend on compute are N/A")
        if p.dequant == "cpu":
            warnings.append(f"{p.kind} weights ({p.scheme}) run on the CPU on this path: decode is bound by "
                            "host memory bandwidth, far below any GPU figure, and the advisor has no host "
                            "bandwidth data, so speeds on this path are N/A"
                            + (" (for FastLLM, --moe_device cuda puts the experts on the GPU)"
                               if p.kind == "expert" else ""))
    for d in explanation.decisions:
        if not d.runs and d.layer_class != "attention_kv":   # KV: the tuner picks a dtype that runs
            warnings.append(f"{d.layer_class}: the engine cannot run this ({d.error or 'no kernel'}); "
                            "speeds are N/A and no launch line is recommended")
    # VRAM
    if overrides.vram_gb is not None:
        if overrides.vram_gb <= 0:
            raise BadInput(f"--vram must be positive (got {overrides.vram_gb})")
        vram = overrides.vram_gb * GIB
        assumptions.append(Assumption("vram", overrides.vram_gb, "GiB", "--vram override"))
    elif gpu.memory_gb:
        vram = gpu.memory_gb * GIB
        assumptions.append(Assumption("vram", gpu.memory_gb, "GiB",
                                      f"GPU table {gpu.id} (vendor VRAM 'GB' are binary: RTX 3090 = 24576 MiB)"))
    else:
        raise BadInput(f"the GPU table has no memory size for {gpu.id}: pass --vram GB")
    # bandwidth and power
    bw = eff.dram_gbs
    if overrides.bandwidth_gbs is not None:
        bw = overrides.bandwidth_gbs
        assumptions.append(Assumption("dram_bandwidth_override", bw, "GB/s", "--bandwidth override"))
    if not bw:
        raise BadInput(f"the GPU table has no memory bandwidth for {gpu.id}: pass --bandwidth GB/s")
    clock = 1.0
    if overrides.power_limit_w is not None and gpu.tdp_w:
        if overrides.power_limit_w <= 0:
            raise BadInput(f"--power-limit must be positive (got {overrides.power_limit_w})")
        if overrides.power_limit_w < gpu.tdp_w:
            clock = (overrides.power_limit_w / gpu.tdp_w) ** POWER_EXPONENT[0]
            warnings.append(f"power limit {overrides.power_limit_w:g} W is below the {gpu.tdp_w:g} W TDP: "
                            f"compute and dequant issue rate scaled to {clock:.0%} of the boost clock "
                            "(dequant-heavy prefill loses clock first)")
        assumptions.append(Assumption("power_clock_factor", clock, "fraction", POWER_EXPONENT[1]))
    link = interconnect.link_for(gpu, overrides.pcie_gen, overrides.pcie_lanes, overrides.nvlink)
    if gpus > 1:
        assumptions.append(Assumption("interconnect", f"{link.description}: {link.gbs:.3g} GB/s per direction, "
                                      f"{link.latency_s * 1e6:g} us latency", "", link.source))
    o = engine.overhead
    if overrides.host_overlap is not None:
        flag = " ".join(engine_flags.no_host_overlap_args(engine.engine)) or "none"
        o = {**o, "host_overlap": overrides.host_overlap,
             "host_overlap_source": ("set: the host work overlaps the GPU's (the engine's default where it has one)"
                                     if overrides.host_overlap else f"set off ({flag}): every step adds its host time")}
    assumptions.extend([
        Assumption("kernels_per_layer", o["kernels_per_layer"], "kernels", o.get("kernels_source", "")),
        Assumption("elementwise_kernels_per_layer", o.get("elementwise_kernels_per_layer", 0), "kernels",
                   o.get("elementwise_source", "none: every unmeasured kernel costs graph_us_per_kernel")),
        Assumption("graph_us_per_kernel", o["graph_us_per_kernel"], "us", o.get("graph_source", "")),
        Assumption("eager_us_per_kernel", o["eager_us_per_kernel"], "us", o.get("eager_source", "")),
        Assumption("host_us_per_step", o["host_us_per_step"], "us", o.get("host_source", "")),
        *([Assumption("host_scheduler_us", ", ".join(f"{n}: {v:g}" for n, v in o["host_scheduler_us"]),
                      "us by running requests", o.get("host_scheduler_source", ""))]
          if o.get("host_scheduler_us") else []),
        Assumption("host_overlap", "yes" if o.get("host_overlap") else "no", "",
                   o.get("host_overlap_source", "estimate: no overlap of host and GPU work known")),
        Assumption("request_overhead_ms", o.get("request_overhead_ms", 0.0), "ms", o.get("request_source", "")),
        Assumption("compute_efficiency", *efficiency.compute_eff("hmma_bf16", gpu.sm)[:1], "fraction",
                   efficiency.compute_eff("hmma_bf16", gpu.sm)[1] + " (where no measured kernel applies)"),
    ])
    ev = measured_ops.evidence_for(gpu, calibration)
    ops = measured_ops.Ops(ev, engine.engine, link.kind if gpus > 1 else "", link.raw_gbs or None,
                       (ev.bandwidth_gbs() or bw) / bw if ev.system is not None else 1.0)
    assumptions.append(Assumption("measured_evidence", ev.system.system if ev.system else "none", "",
                                  f"{ev.relation}: {ev.why}" + (f"; {ev.scaling()}" if ev.system else
                                  "; every speed term is an estimate (labelled in its source)")))
    arch = checkpoint.arch
    swa = engine.swa_full_tokens_ratio if arch.sliding_window and arch.sliding_window_layers else None
    if swa is not None:
        assumptions.append(Assumption("swa_full_tokens_ratio", swa, "window/full tokens", engine.swa_source))
    model = CostModel(wm, checkpoint.arch, eff, attn_mma, clock, o, engine.allreduce_per_layer, link, bw,
                      engine.recurrent, "bfloat16" if bf16 else "float16", swa, ops)
    if any(p.kind == "expert" for p in wm.parts):
        cal_moe = calibration is not None and calibration.gpu_id == gpu.id and \
            "moe_grouped" in calibration.kernel_bandwidth_eff
        assumptions.append(Assumption("bandwidth_eff.moe_grouped", eff.bandwidth_eff["moe_grouped"], "fraction",
                                      f"microbench {calibration.measured_at}" if cal_moe
                                      else efficiency.MOE_BANDWIDTH_EFF[1], calibrated=cal_moe))
        assumptions.append(Assumption("moe_extra_kernels_per_layer", o.get("moe_extra_kernels_per_layer", 0),
                                      "kernels", o.get("moe_kernels_source", "")))
    if arch.linear_attention_layers and arch.linear_state is None:
        warnings.append(f"{arch.linear_attention_layers} linear-attention layers keep a per-request state, but "
                        "config.json lacks its shape: memory and decode figures leave it out")
    elif arch.linear_state is not None and not engine.recurrent:
        warnings.append(f"the {engine.engine} memory profile has no recurrent_state rules: the "
                        f"{arch.linear_state.layers} linear-attention layers' per-request state is left out")
    allowed, rejected, default_kv = allowed_kv(engine, explanation, kv_decisions)
    fixed_kv = engine.kv_dtype(overrides.kv_cache_dtype) if overrides.kv_cache_dtype else None
    if fixed_kv is None:
        allowed, default_kv = one_16bit_kv(engine, allowed, default_kv, bf16,
                                           auto_is_model_dtype=checkpoint.kv_cache_quant is None)
    if not bf16:
        if fixed_kv is not None and fixed_kv.kind == "bf16" and fixed_kv.name != "auto":
            warnings.append(f"{gpu.name} has no BF16: the model runs in FP16, so a 16-bit KV cache should be "
                            f"requested as FP16, not {overrides.kv_cache_dtype}")
    for dt in allowed:
        assumptions.append(Assumption(f"kv_bits.{dt.name}", dt.bits, "bits/value", dt.source or engine.kv_source))
    method, note = spec_choice.method_for(checkpoint.arch.mtp_layers, engine, overrides.spec_method)
    if overrides.kv_cache_dtype and engine.kv_dtype(overrides.kv_cache_dtype) is None:
        raise UsageError(f"--kv-cache-dtype {overrides.kv_cache_dtype!r} is not a {engine.engine} KV dtype the "
                         f"advisor knows (known: {', '.join(dt.name for dt in engine.kv_dtypes)})")
    acceptance, spec_assumptions = spec_choice.acceptance(engine, method, tuple(overrides.acceptance or ()),
                                                          overrides.acceptance_kind)
    assumptions.extend(spec_assumptions)
    deq = dict(eff.dequant_overhead)
    auto = overrides.spec_method is not None or method is None or method.name == "mtp"
    return PlanContext(checkpoint, explanation, gpu, gpus, engine, model, vram, allowed, rejected, default_kv,
                       method, acceptance, overrides, deq, tuple(assumptions), tuple(warnings), note, auto)

