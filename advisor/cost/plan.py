"""make_plan: predictions for the kernel path `explain` chose, plus tuned serve settings.

Used by the `plan` command, the TUI, reports and the launcher. Pure: every input is a frozen
record built at the edge; the result is a frozen Plan whose numbers carry their derivations.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Callable

from advisor.checkpoint.model import CheckpointInfo
from advisor import engines
from advisor.engines import flags as engine_flags
from advisor.cost import context as ctxmod
from advisor.cost import efficiency, feasibility
from advisor.cost.derived import Derived
from advisor.cost.engine_profile import EngineMemory, load_engine_memory
from advisor.cost.overrides import Overrides
from advisor.cost import spec_concurrency, speculative
from advisor.cost.step_costs import module_groups_derived
from advisor.cost.serving import serve
from advisor.cost.workload import Workload
from advisor.gpu_spec import GpuSpec
from advisor.kernel_path.model import Explanation, LayerDecision
from advisor.errors import AdvisorError
from advisor.cost.plan_records import Plan, Predictions, Recommendation, SpecPrediction, StatePrediction
from advisor.cost.tuning import Tuning, decode_context, effective_workload, max_model_len, tune

AGG_BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)


def _flags(eng: EngineMemory, rec_kv: str, share: float, batch: int, chunked: int, tp: int,
           spec_method: str | None = None, draft_tokens: int = 0, graphs: bool = True,
           version: str | None = None, context: int | None = None, env: dict[str, str] | None = None,
           prefix_caching: bool | None = None, chat_template: str | None = None,
           host_overlap: bool | None = None) -> dict[str, str]:
    """Every setting the plan recommends, in the engine's spelling (speculative and eager flags from
    advisor.engines.flags, the same builder `launch --plan` uses); environment settings first."""
    spec = engines.find(eng.engine)
    tp_flag = spec.tp_flag if spec else "--tp"
    flags = {eng.kv_flag: rec_kv, eng.share_flag: f"{share:g}", eng.max_batch_flag: str(batch),
             eng.chunked_flag: str(chunked), tp_flag: str(tp)}
    if spec and tp < spec.tp_flag_from:
        del flags[tp_flag]          # its launcher passes TP only from tp_flag_from (FastLLM: 2): plan = launch
    if spec_method and draft_tokens:
        flags.update(engine_flags.as_flag_dict(engine_flags.speculative_args(eng.engine, spec_method, draft_tokens)))
    flags.update(engine_flags.as_flag_dict(engine_flags.context_args(eng.engine, context)))
    if spec and spec.plan_states_prefix_cache:     # its default depends on the model: say what the plan assumed
        flags.update(engine_flags.as_flag_dict(engine_flags.prefix_cache_args(eng.engine, prefix_caching)))
    flags.update(engine_flags.as_flag_dict(engine_flags.chat_template_args(eng.engine, chat_template)))
    if not graphs:
        flags.update(engine_flags.as_flag_dict(engine_flags.eager_args(eng.engine, version)))
    if host_overlap is False:                    # the plan was costed without overlap: launch it so
        flags.update(engine_flags.as_flag_dict(engine_flags.no_host_overlap_args(eng.engine, version)))
    # environment variables first: the flag line can then be pasted in front of the engine command
    front = dict(engine_flags.eager_env(eng.engine)) if not graphs else {}
    return {**front, **(env or {}), **flags}


def _default_explainer(checkpoint: CheckpointInfo, gpu: GpuSpec, gpus: int, explanation: Explanation,
                       overrides: Overrides) -> Callable[[int], Explanation]:
    """explain() at another TP size with the options a plan knows (KV dtype); callers that hold the
    user's InstallOptions pass their own ``explain_at_tp``."""
    def at(tp: int) -> Explanation:
        from advisor.kernel_path.explain import explain
        from advisor.kernel_path.options import InstallOptions

        return explain(checkpoint, gpu, gpus=gpus, engine=explanation.engine, version=explanation.engine_version,
                       options=InstallOptions(kv_cache_dtype=overrides.kv_cache_dtype, tp=tp))
    return at


def _tune_on_gpu_path(checkpoint, explanation, gpu, gpus, eng, overrides, calibration, kv_decisions, workload,
                      explain_at_tp):
    """Tune over the TP sizes whose explained path runs on the GPU; when the chosen TP's path differs
    from the one explained (FastLLM INT4: CPU at TP 2, GPU at TP 1), re-cost on the chosen path."""
    ctx = ctxmod.build(checkpoint, explanation, gpu, gpus=gpus, engine=eng, overrides=overrides,
                       calibration=calibration, kv_decisions=kv_decisions)
    workload, capped = effective_workload(ctx, workload)
    exp_tp = overrides.tp or max(1, gpus)
    paths = {exp_tp: explanation}
    if not overrides.tp and gpus > 1:
        at = explain_at_tp or _default_explainer(checkpoint, gpu, gpus, explanation, overrides)
        for n in feasibility.tp_candidates(gpus, checkpoint.arch):
            if n not in paths:
                try:
                    paths[n] = at(n)
                except AdvisorError:
                    continue
    cpu = {n: feasibility.cpu_layers(e) for n, e in paths.items()}
    ctx = replace(ctx, cpu_layers_at_tp=cpu)
    t = tune(ctx, workload)
    if overrides.tp and cpu[exp_tp]:
        # the user fixed a TP whose path leaves layers on the CPU: say which TP sizes would not
        at = explain_at_tp or _default_explainer(checkpoint, gpu, gpus, explanation, overrides)
        on_gpu = []
        for n in feasibility.tp_candidates(gpus, checkpoint.arch):
            try:
                if n != exp_tp and not feasibility.cpu_layers(at(n)):
                    on_gpu.append(n)
            except AdvisorError:
                continue
        if on_gpu:
            t = replace(t, notes=t.notes + (f"--tp {exp_tp} runs {', '.join(cpu[exp_tp])} on the CPU; "
                                            f"--tp {on_gpu[0]} keeps every layer on the GPU",))
    tp = t.settings.tp
    if tp != exp_tp and tp in paths and paths[tp].kernel_signature() != explanation.kernel_signature():
        ctx2 = ctxmod.build(checkpoint, paths[tp], gpu, gpus=gpus, engine=eng, overrides=replace(overrides, tp=tp),
                            calibration=calibration, kv_decisions=kv_decisions)
        ctx2 = replace(ctx2, cpu_layers_at_tp=cpu)
        t2 = tune(ctx2, workload)
        note = (f"costed on the kernel path explain gives at TP {tp}, not the TP {exp_tp} one "
                f"(`explain --tp {tp}` shows it)")
        t = Tuning(t2.settings, tuple(o for o in t.options if o.knob == "tp")
                   + tuple(o for o in t2.options if o.knob != "tp"),
                   tuple(dict.fromkeys(t.notes + t2.notes + (note,))))
        ctx = ctx2
    return ctx, workload, capped, t


_SPEED = ("decode_tok_s", "decode_aggregate_tok_s", "prefill_tok_s", "prefill_seconds", "bound", "crossover_batch",
          "speculative", "serving")


def _availability(ctx, s, preds: Predictions, single, pf, derivations: dict) -> tuple[Predictions, str]:
    """Predictions with N/A (None and a reason) where the engine refuses the path, the configuration does
    not fit, runs layers on the CPU, or needs a rate the GPU table lacks; and why no launch line is
    recommended ('' = one is)."""
    na: dict[str, str] = {}
    blocked = ""
    cpu = ctx.cpu_layers_at_tp.get(s.tp) or feasibility.cpu_layers(ctx.explanation)
    refused = feasibility.refusal(ctx.explanation, kv_runs=bool(ctx.allowed_kv) and s.kv.name not in ctx.rejected_kv)
    if refused:
        # the engine refuses or crashes: no speed, and no launch line that would only fail
        blocked = refused
        for f in _SPEED:
            na[f] = refused
    elif ctx.budget(s).pool_bytes.value <= 0:
        blocked = feasibility.does_not_fit_note(ctx, lambda n: replace(s, tp=n))
        for f in _SPEED + ("max_context_per_request", "max_concurrency_at_context"):
            na[f] = blocked
    elif cpu:
        why = feasibility.cpu_reason(cpu, s.tp)
        for f in _SPEED:
            na[f] = why
    else:
        if single.unknown:
            why = (f"{', '.join(single.unknown)} unknown on {ctx.gpu.id} (GPU table null); memory and fixed time "
                   f"alone give at most {1.0 / single.seconds:,.1f} tok/s")
            for f in ("decode_tok_s", "decode_aggregate_tok_s", "bound", "crossover_batch", "speculative"):
                na[f] = why
        if pf.unknown:
            why = f"{', '.join(pf.unknown)} unknown on {ctx.gpu.id} (GPU table null)"
            na["prefill_tok_s"] = na["prefill_seconds"] = why
        if single.unknown or pf.unknown:
            na["serving"] = na.get("decode_tok_s") or na["prefill_tok_s"]
    lay = ctx.kv_layout(s)
    if not lay.mla and lay.values_per_layer_token <= 0 and (lay.full_layers or lay.window_layers):
        why = "KV heads or head size unknown in the config (see inspect's findings): no KV figure can be sized"
        for f in ("kv_pool_tokens", "max_context_per_request", "max_concurrency_at_context"):
            na.setdefault(f, why)
    changes: dict = {"upper_bound": ctx.model.eff.upper_bound}
    if na:
        changes["na"] = na
        for f in ("decode_tok_s", "prefill_tok_s", "prefill_seconds", "bound", "crossover_batch"):
            if f in na:
                changes[f] = None
        if "decode_aggregate_tok_s" in na:
            changes["decode_aggregate_tok_s"] = {}
        if "speculative" in na:
            changes["speculative"] = replace(preds.speculative, per_k=(), curve=None)
            for name in [n for n in derivations if n.startswith("speculative_")]:
                derivations.pop(name)
        if "serving" in na:
            changes["serving"] = None
            for k in ("ttft_isolated", "ttft_loaded", "served_output_tok_s"):
                derivations.pop(k, None)
        if "max_context_per_request" in na:
            changes["max_context_per_request"] = 0
            changes["max_concurrency_at_context"] = 0
        if "decode_tok_s" in na and "decode_tok_s" in derivations:
            d = derivations.pop("decode_tok_s")
            if not blocked and not cpu:           # rates unknown: what memory and fixed time allow
                derivations["decode_tok_s_at_most"] = d
    return replace(preds, **changes), blocked


def make_plan(checkpoint: CheckpointInfo, explanation: Explanation, gpu: GpuSpec, *, gpus: int = 1,
              workload: Workload, overrides: Overrides = Overrides(), calibration=None,
              kv_decisions: dict[str, LayerDecision] | None = None,
              engine_memory: EngineMemory | None = None,
              explain_at_tp: Callable[[int], Explanation] | None = None) -> Plan:
    """Cost ``explanation``'s kernel path for ``checkpoint`` on ``gpus`` x ``gpu`` and tune settings.

    ``kv_decisions``: explain's attention decision per KV dtype the engine offers (the tuner picks
    only dtypes whose decision runs); without it only the explanation's own KV dtype is eligible.
    ``engine_memory``: defaults to the memory profile of ``explanation.engine`` at its version
    (profiles/engine_memory/, nearest older).
    ``explain_at_tp``: explain() at another TP size (the tuner never picks a TP whose path runs layers
    on the CPU); defaults to explain() with the plan's KV dtype.
    """
    if checkpoint.totals.sizes_from == "unknown" or not checkpoint.modules:
        # inspect answered the scheme but could not size the model: every figure would be made up
        from advisor.errors import Unsupported

        raise Unsupported("the checkpoint's sizes are unknown (see `inspect`'s warnings), so there is nothing to "
                          "plan: speeds, memory and KV figures need the model's sizes")
    eng = engine_memory or load_engine_memory(explanation.engine, explanation.engine_version)
    ctx, workload, capped, t = _tune_on_gpu_path(checkpoint, explanation, gpu, gpus, eng, overrides, calibration,
                                                 kv_decisions, workload, explain_at_tp)
    explanation = ctx.explanation          # the path of the chosen TP size
    s = t.settings
    c = decode_context(workload, ctx)
    single = ctx.decode(s, 1, c)
    budget = ctx.budget(s)
    max_conc = ctx.max_concurrency(s, workload.context_tokens)
    limit = max(1, min(s.max_batch, max_conc) if max_conc else 1)
    agg = {}
    for b in AGG_BATCHES:
        if b > limit and b != 1:
            break
        agg[b] = b / ctx.decode(s, b, c).seconds
    if limit not in agg:
        agg[limit] = limit / ctx.decode(s, limit, c).seconds
    pf = ctx.prefill(s, ctx.overrides.prompt_tokens or workload.prompt_tokens)
    serving = serve(ctx, s, ctx.overrides.prompt_tokens or workload.prompt_tokens, workload.output_tokens,
                    max(1, min(workload.concurrency, limit)), c)
    pools = {}
    for kv in ctx.allowed_kv:
        pools[kv.name] = ctx.pool_tokens(s, kv)
    mcr = ctx.max_context(s, max(1, min(workload.concurrency, s.max_batch)))
    # no batch beyond what the pool holds at the workload's context can run: the search stops there
    cross_limit = max(1, max_conc)
    crossover = ctx.model.crossover_batch(c, s.kv, tp=s.tp, limit=cross_limit)
    spec_b = max(1, min(workload.concurrency, s.max_batch))
    pts = spec_concurrency.spec_points(ctx, s, spec_b, c) if ctx.spec_method is not None else []
    # speculation under concurrency: each batch the pool holds, plainly and at the k that pays there
    # (for workloads that weigh drafts, or a method or draft count the user asked for)
    fixed_k = ctx.overrides.draft_tokens
    spec_curve = spec_concurrency.curve(ctx, s, min(max(limit, max_conc), 1024), c,
                                        range(fixed_k, fixed_k + 1) if fixed_k else speculative.K_RANGE) \
        if workload.speculative or ctx.overrides.spec_method or fixed_k else None
    spec = SpecPrediction(ctx.spec_method.name if ctx.spec_method else None, ctx.spec_note,
                          tuple({"k": p.k, "expected_tokens_per_step": p.expected_tokens, "speedup": p.speedup,
                                 "step_seconds": p.step_seconds} for p in pts), s.draft_tokens, spec_b, spec_curve)
    st = ctx.recurrent(s)
    state_pred = None
    if st is not None:
        pool_b = max(budget.pool_bytes.value, 0.0)
        if st.pool == "split":
            reserve, cap = st.split_reserve(pool_b, s.max_batch)
        else:
            reserve, cap = s.max_batch * st.request_bytes, None
        state_pred = StatePrediction(st.kind, st.layers, st.request_bytes, st.step_bytes(max(1, s.draft_tokens + 1)),
                                     st.slots, st.dtypes.conv, st.dtypes.ssm, st.pool, st.kv_block_tokens,
                                     reserve, cap)
    preds = Predictions(
        decode_tok_s=1.0 / single.seconds, decode_aggregate_tok_s=agg, prefill_tok_s=pf.tok_s,
        prefill_seconds=pf.seconds, kv_pool_tokens=pools, max_context_per_request=mcr,
        max_concurrency_at_context=max_conc, bound=single.bound if single.bound != "overhead" else (
            "bandwidth" if single.t_bytes >= single.t_compute else "compute"),
        crossover_batch=crossover, speculative=spec, decode_context_tokens=int(c),
        weights_gib_per_gpu=next((d.value for n, d in budget.terms if n == "weights"), ctx.weight_bytes(s.tp)) / 2**30,
        recurrent_state=state_pred, serving=serving)
    kvl = ctx.kv_layout(s)
    derivations = {
        "decode_tok_s": Derived(1.0 / single.seconds, "tok/s", "1 / t_step(B=1, C)",
                                {"t_step": single.seconds, **single.derived.inputs}, single.derived.source),
        "prefill_seconds": pf.derived,
        **serving.derivations,
        "decode_linear_layers": module_groups_derived(single, "decode, batch 1"),
        "prefill_linear_layers": module_groups_derived(pf, "prefill, one full chunk"),
        "kv_pool_bytes": budget.pool_bytes,
        "kv_reserve_bytes": budget.reserve_bytes,
        "kv_bytes_per_token": Derived(kvl.bytes_per_token(s.kv), "B/token/GPU",
                                      "KV layers x 2 x kv_heads/N x head_dim x bits/8 (MLA: latent)"
                                      + ("; KV layers = full + swa_ratio x window layers (split pool)"
                                         if kvl.swa_ratio is not None else ""),
                                      {"kv_layers": kvl.full_layers, "mtp_draft_kv_layers": kvl.draft_layers,
                                       **({"window_layers": kvl.window_layers, "swa_ratio": kvl.swa_ratio}
                                          if kvl.swa_ratio is not None else {}),
                                       "bits": s.kv.bits, "N": s.tp},
                                      "; ".join(x for x in (s.kv.source or eng.kv_source,
                                                            eng.draft_kv_source if kvl.draft_layers else "",
                                                            eng.swa_source if kvl.swa_ratio is not None else "")
                                                if x)),
        "memory_share": budget.share,
        # every term the engine holds besides the KV cache, as its memory profile sizes it
        **({"memory.budget": budget.budget_bytes} if budget.budget_bytes is not None else {}),
        **{f"memory.{name}": d for name, d in budget.terms},
    }
    if st is not None:
        derivations["recurrent_state_bytes_per_request"] = st.derived
        pool_b = max(budget.pool_bytes.value, 0.0)
        if st.pool == "split":
            derivations["kv_pool_bytes_after_state"] = Derived(
                ctx.kv_pool_bytes(s, s.max_batch), "B", "pool - state pool; state pool = (K + 1) x state, "
                "K = (pool x r/(1+r) - state) / state; running requests <= K / slots",
                {"pool": pool_b, "state": st.state_bytes, "r": st.memory_ratio,
                 "slots_per_running_request": st.max_slots_per_request,
                 "max_running_requests": ctx.state_request_cap(s)}, st.derived.source)
        else:
            derivations["kv_pool_bytes_after_state"] = Derived(
                ctx.kv_pool_bytes(s, s.max_batch), "B", "pool - max batch x state per request",
                {"pool": pool_b, "max_batch": s.max_batch, "state_per_request": st.request_bytes},
                st.derived.source)
        derivations["recurrent_state_step_bytes"] = Derived(
            st.step_bytes(max(1, s.draft_tokens + 1)), "B/request/step",
            "layers x (conv + state) x (1 load + 1 store per verified position)",
            {"layers": st.layers, "state_bytes": st.state_bytes, "positions": max(1, s.draft_tokens + 1)},
            st.traffic_source)
    if pts:
        best = max(pts, key=lambda p: p.speedup)
        derivations["speculative_best"] = best.derived
    if spec_curve is not None:
        derivations["speculative_concurrency"] = spec_concurrency.derivation(spec_curve)
        k_shown = s.draft_tokens or (max(pts, key=lambda p: p.speedup).k if pts else 0)
        if k_shown:        # the recommended (else the best) draft count at the batch above, term by term
            derivations.update(spec_concurrency.step_derivations(ctx, s, spec_b, k_shown, c))
    warnings = list(ctx.warnings) + ([capped] if capped else []) + list(t.notes) \
        + ([eng.version_note] if eng.version_note else [])
    if ctx.overrides.context_tokens and budget.pool_bytes.value > 0 and c > ctx.max_context(s, 1):
        warnings.append(f"--context {c:,} exceeds the {ctx.max_context(s, 1):,} tokens the KV pool holds for one "
                        "request: a request that long cannot run with these settings (decode is costed anyway)")
    main_kv = next((d for d in explanation.decisions if d.layer_class == "attention_kv"), None)
    if main_kv is not None and not main_kv.runs:
        why = main_kv.error or "; ".join(main_kv.reasons)
        if s.kv.name in ctx.rejected_kv or not ctx.allowed_kv:
            warnings.append(f"the KV cache cannot run as configured ({why}); no KV dtype explain accepts "
                            "was found, so the KV costs assume it would run")
        else:
            warnings.append(f"the default KV cache ({main_kv.kv_cache_dtype}) does not run here ({why}); "
                            f"the recommendation sets {eng.kv_flag} {s.kv.name}")
    if budget.note:
        warnings.append(budget.note)
    legacy = sorted({d.kernel or "" for d in explanation.decisions if d.runs and d.layer_class != "attention_kv"
                     and any(efficiency.legacy_mma_sync(r.mma, gpu.sm) for r in (d.at_m(1), *d.m_ranges))})
    if legacy:
        marlin = ctx.model.marlin_rate
        warnings.append(f"prefill on {', '.join(legacy)} is an {efficiency.LEGACY_MMA_SYNC_NOTE}" if marlin is None
                        else f"prefill and large batches on {', '.join(legacy)}: {efficiency.MARLIN_MMA_SYNC_NOTE}; "
                             f"{marlin[1]}")
    if single.bound == "overhead":
        warnings.append("fixed per-step costs (kernel launches, host, all-reduce) exceed the GPU time of a "
                        "batch-1 step: weight-format differences shrink at batch 1 on this setup")
    if "nvfp4" in s.kv.kind or s.kv.kind in ("fp4_mx", "int4"):
        measured = es.four_bit_kv_warning if (es := engines.find(eng.engine)) else ""
        warnings.append(measured or "4-bit KV cache is unpacked to 16 bits on every attention read (counted in "
                        "the prediction as issue work); it is lossy: check accuracy against an 8-bit KV cache")
    preds, blocked = _availability(ctx, s, replace(preds, crossover_limit=cross_limit), single, pf, derivations)
    spec_name = ctx.spec_method.name if ctx.spec_method and s.draft_tokens else None
    mml = None if blocked else max_model_len(ctx, s, workload)[0]
    env = dict(engine_flags.draft_quant_env(eng.engine, spec_name, s.draft_tokens, eng.draft_quant)) \
        if ctx.draft_head_quant() else {}
    prefix = bool(eng.prefix_cache.get("default")) if eng.prefix_cache else None
    template = ctx.overrides.chat_template
    flags = {} if blocked else _flags(eng, s.kv.name, s.memory_share, s.max_batch, s.chunked_prefill, s.tp,
                                      spec_name, s.draft_tokens, s.cuda_graphs,
                                      explanation.engine_version or eng.version, mml, env, prefix, template,
                                      ctx.overrides.host_overlap)
    rec = Recommendation(s.kv.name, s.max_batch, s.draft_tokens, s.memory_share, s.chunked_prefill, s.tp,
                         s.cuda_graphs, spec_name, flags, blocked, mml, env, prefix, template,
                         ctx.overrides.host_overlap)
    return Plan(checkpoint.source, checkpoint.label, gpu.id, gpu.name, gpus, explanation.engine,
                explanation.engine_version or eng.version, workload, preds, rec, t.options,
                ctx.assumptions, tuple(dict.fromkeys(warnings)), derivations)
