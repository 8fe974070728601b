"""`nvfp4-advisor plan CHECKPOINT`: predicted speed and memory of the path that really runs, and
the serve settings tuned for a workload."""

from __future__ import annotations

NAME = "plan"
HELP = "predict decode/prefill speed and KV memory for the real kernel path; recommend serve settings"
ORDER = 50


def _floats(text: str) -> tuple[float, ...]:
    """--acceptance: per-position acceptance rates, each a probability in [0, 1]."""
    import argparse
    import math

    try:
        rates = tuple(float(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers, got {text!r}") from None
    if not rates:
        raise argparse.ArgumentTypeError(f"expected at least one rate, got {text!r}")
    bad = [r for r in rates if not (math.isfinite(r) and 0 <= r <= 1)]
    if bad:
        raise argparse.ArgumentTypeError(f"acceptance rates are probabilities in [0, 1], got {bad[0]:g}")
    return rates


def add_arguments(parser) -> None:
    import argparse

    from advisor.commands._args import MAX_GPUS, add_checkpoint_argument, add_gpu_arguments, number, whole

    add_checkpoint_argument(parser)
    add_gpu_arguments(parser, what_if=True)
    parser.add_argument("--engine", metavar="E[@V]", default="vllm",
                        help="serving engine and optional version, e.g. vllm@0.33 (default: vllm)")
    parser.add_argument("--workload", default="interactive",
                        help="workload profile: interactive, agents, long-context, batch, or one from --workloads")
    parser.add_argument("--workloads", metavar="YAML", default=None,
                        help="your own workload profiles file (same format as profiles/workloads.yaml)")
    what = parser.add_argument_group("what-if overrides")
    what.add_argument("--vram", metavar="GB", type=number(0, 10240),
                      help="VRAM per GPU in GiB (modded cards; at most 10240)")
    what.add_argument("--power-limit", metavar="W", type=number(0, 10000), help="the card's power limit")
    what.add_argument("--bandwidth", metavar="GB/s", type=number(0, 100000),
                      help="DRAM bandwidth instead of the table's")
    what.add_argument("--pcie-gen", type=whole(3, 6), help="PCIe generation between the GPUs (TP all-reduce)")
    what.add_argument("--pcie-lanes", type=whole(1, 32), help="PCIe lanes per GPU")
    what.add_argument("--nvlink", action=argparse.BooleanOptionalAction, default=None,
                      help="the GPUs are (--nvlink) or are not (--no-nvlink) joined by NVLink "
                           "(default: the probed topology, else NVLink only for SXM-class datacenter parts)")
    what.add_argument("--no-calibration", action="store_true", help="ignore saved microbench calibration")
    fixed = parser.add_argument_group("settings you already fixed (the tuner keeps them)")
    fixed.add_argument("--kv-cache-dtype", metavar="DTYPE", help="engine KV-cache dtype flag value")
    fixed.add_argument("--max-batch", type=whole(1, 65536), help="max concurrent sequences (max-num-seqs)")
    fixed.add_argument("--memory-share", type=number(0), help="engine memory fraction (gpu-memory-utilization)")
    fixed.add_argument("--chunked-prefill", type=whole(1, 10**8), help="chunked-prefill size in tokens")
    fixed.add_argument("--tp", type=whole(1, MAX_GPUS), help="tensor-parallel size")
    fixed.add_argument("--draft-tokens", type=whole(0, 16), help="speculative draft tokens k, 0..16 (0 = off)")
    fixed.add_argument("--spec-method", choices=("mtp", "eagle", "eagle3", "dflash", "ngram", "draft_model"),
                       help="speculative method (default: the checkpoint's MTP head, else n-gram)")
    fixed.add_argument("--acceptance", type=_floats, metavar="A1,A2,...",
                       help="measured per-position draft acceptance rates")
    fixed.add_argument("--acceptance-kind", choices=("unconditional", "conditional"),
                       help="how --acceptance was measured: the share of all verify steps accepting position i "
                            "(unconditional, what vLLM and FastLLM print) or given the earlier positions were "
                            "accepted (conditional); default: what the engine prints")
    fixed.add_argument("--chat-template", metavar="FILE",
                       help="the chat template --acceptance was measured with; the launch line passes it on")
    fixed.add_argument("--draft-bytes", type=number(0, 1e15), metavar="BYTES", help="bytes one draft pass reads")
    graphs = fixed.add_mutually_exclusive_group()
    graphs.add_argument("--cuda-graphs", dest="cuda_graphs", action="store_true", default=None,
                        help="CUDA graphs on")
    graphs.add_argument("--no-cuda-graphs", dest="cuda_graphs", action="store_false", help="eager mode")
    overlap = fixed.add_mutually_exclusive_group()
    overlap.add_argument("--async-scheduling", dest="host_overlap", action="store_true", default=None,
                         help="the engine schedules the next step while the GPU runs this one (vLLM "
                              "--async-scheduling, SGLang's overlap scheduler; their default)")
    overlap.add_argument("--no-async-scheduling", dest="host_overlap", action="store_false",
                         help="each step waits for its host work (vLLM --no-async-scheduling, SGLang "
                              "--disable-overlap-schedule; vLLM before 0.14)")
    fixed.add_argument("--context", type=whole(1, 10**8), metavar="TOKENS", help="context length to cost decode at")
    fixed.add_argument("--prompt", type=whole(1, 10**8), metavar="TOKENS", help="prompt length to cost prefill at")
    parser.add_argument("--quality", metavar="FILE", action="append", default=[],
                        help="quality evidence to show per format: `quality --json` or `bench --reference-url "
                             "--json` output; repeat for more")


def probed_device(selection, probe_result):
    if probe_result is None or not selection.devices:
        return None
    for d in probe_result.devices:
        if d.index == selection.devices[0]:
            return d
    return None


def probed_nvlink(selection, probe_result) -> bool | None:
    """True/False when the probe saw how the selected cards are linked (all NVLink/NVSwitch, or not)."""
    if probe_result is None or len(getattr(selection, "devices", ())) < 2:
        return None
    idx = set(selection.devices)
    kinds = [link.kind for link in probe_result.topology if link.a in idx and link.b in idx]
    if not kinds or "unknown" in kinds:
        return None
    return all(k in ("nvlink", "nvswitch") for k in kinds)


def overrides_from_args(args, device=None, nvlink: bool | None = None):
    from advisor.cost.overrides import Overrides

    # numeric flags are range-checked by their argparse types (advisor.commands._args.number/whole)
    if args.memory_share is not None and not 0 < args.memory_share <= 1:
        from advisor.errors import UsageError

        raise UsageError(f"--memory-share must be in (0, 1] (got {args.memory_share:g})")
    template = getattr(args, "chat_template", None)
    if template is not None:
        from pathlib import Path

        from advisor.errors import BadInput

        if not Path(template).is_file():
            raise BadInput("no such chat template file (--chat-template)", path=template)
    power = args.power_limit
    pcie_gen, pcie_lanes = args.pcie_gen, args.pcie_lanes
    if device is not None:
        raw = device.nvml
        if power is None:
            power = raw.enforced_power_limit_w or raw.power_limit_w
        pcie_gen = pcie_gen or raw.pcie_max_gen
        pcie_lanes = pcie_lanes or raw.pcie_max_width
    return Overrides(
        vram_gb=args.vram, power_limit_w=power, bandwidth_gbs=args.bandwidth, kv_cache_dtype=args.kv_cache_dtype,
        max_batch=args.max_batch, memory_share=args.memory_share, chunked_prefill=args.chunked_prefill,
        tp=args.tp, draft_tokens=args.draft_tokens, spec_method=args.spec_method, acceptance=args.acceptance,
        acceptance_kind=getattr(args, "acceptance_kind", None), chat_template=getattr(args, "chat_template", None),
        draft_bytes=args.draft_bytes, cuda_graphs=args.cuda_graphs, host_overlap=getattr(args, "host_overlap", None),
        context_tokens=args.context,
        prompt_tokens=args.prompt, pcie_gen=pcie_gen, pcie_lanes=pcie_lanes,
        nvlink=getattr(args, "nvlink", None) if getattr(args, "nvlink", None) is not None else nvlink)



def run(args):
    from advisor.calibration import load_calibration
    from advisor.checkpoint.inspect import inspect_checkpoint
    from advisor.commands import Outcome
    from advisor.commands._args import NO_GPU_WHAT_IF, selection_from_args
    from advisor.services.analysis import explain_and_plan
    from advisor.cost.feasibility import check_tp
    from advisor.cost.plan_doc import to_doc
    from advisor.cost.workload import get_workload
    from advisor.jsonout import document
    from advisor.kernel_path.options import InstallOptions
    from advisor.probe import probe

    from advisor.kernel_path.rule_versions import parse_engine_spec

    engine, version = parse_engine_spec(args.engine)   # unknown engine: exit 2 with the list, as explain
    workload = get_workload(args.workload, args.workloads)
    from advisor.quality.evidence import evidence_doc, load_files, per_format

    weights, outputs = load_files(getattr(args, "quality", []))     # bad files fail before the work
    probe_result = probe()            # also for an id: a probed card brings its uuid and power limit
    selection = selection_from_args(args, probe_result, what_if=True)
    device = probed_device(selection, probe_result)
    overrides = overrides_from_args(args, device, probed_nvlink(selection, probe_result))
    checkpoint = inspect_checkpoint(args.checkpoint)
    gpu, n = selection.spec, selection.count
    check_tp(args.tp, n, checkpoint.arch)
    options = InstallOptions(kv_cache_dtype=args.kv_cache_dtype, tp=args.tp)
    calibration = None
    if not args.no_calibration:
        uuid = device.nvml.uuid if device is not None else None
        calibration = load_calibration(gpu.id, uuid)
    explanation, plan = explain_and_plan(checkpoint, gpu, gpus=n, engine=engine, version=version,
                                         workload=workload, overrides=overrides, calibration=calibration,
                                         options=options)
    payload = plan.to_json()
    payload["gpu"]["selection"] = selection.note
    payload["explanation_summary"] = explanation.summary
    evidence = per_format(checkpoint.scheme_shares, weights, outputs)
    payload["quality_evidence"] = evidence
    doc = to_doc(plan) + evidence_doc(evidence)
    if selection.note.startswith(NO_GPU_WHAT_IF):
        from advisor.doc import Doc, Paragraph

        doc = Doc((Paragraph(selection.note, "warn"),)) + doc
    return Outcome(json=document("plan", payload), doc=doc)
