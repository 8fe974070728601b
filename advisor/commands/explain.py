"""`nvfp4-advisor explain CHECKPOINT --gpu ID|auto --engine vllm|sglang|fastllm[@VERSION]`:
which kernel the engine runs for each layer class on this GPU, and why."""

from __future__ import annotations

import argparse
from typing import Any

from advisor.commands._args import MAX_GPUS, add_checkpoint_argument, add_gpu_arguments, whole

NAME = "explain"
HELP = "which kernel an engine runs for each layer class of a checkpoint on a GPU, and why"
ORDER = 40

# --with/--without names -> InstallOptions facts.
DEPENDENCY_NAMES = {
    "flashinfer": "flashinfer", "flashinfer-cubin": "flashinfer_cubin", "nvcc": "nvcc_ninja",
    "nvcc-ninja": "nvcc_ninja", "deepgemm": "deepgemm", "humming": "humming", "b12x": "b12x",
    "triton-kernels": "triton_kernels", "fbgemm": "fbgemm", "conch": "conch",
    "cutlass-fp8": "cutlass_fp8_build",
}


def _key_value(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key.strip(), value.strip()


def _dependency(text: str) -> str:
    name = text.strip().lower().replace("_", "-")
    if name not in DEPENDENCY_NAMES:
        raise argparse.ArgumentTypeError(f"unknown dependency {text!r}; choose from {', '.join(DEPENDENCY_NAMES)}")
    return DEPENDENCY_NAMES[name]


def add_arguments(parser) -> None:
    add_checkpoint_argument(parser)
    add_gpu_arguments(parser, what_if=True)
    parser.add_argument("--engine", default="vllm", metavar="ENGINE[@VERSION]",
                        help="vllm, sglang or fastllm, optionally @VERSION (default: vllm, newest rules)")
    parser.add_argument("--all-gpus", action="store_true", help="the decision on every GPU in the table")
    g = parser.add_argument_group("install and launch options (what the engine finds and is told)")
    g.add_argument("--no-flashinfer", action="store_true", help="FlashInfer is not installed")
    g.add_argument("--with", dest="with_deps", action="append", type=_dependency, default=[], metavar="DEP",
                   help=f"treat DEP as present ({', '.join(DEPENDENCY_NAMES)}); repeatable")
    g.add_argument("--without", dest="without_deps", action="append", type=_dependency, default=[], metavar="DEP",
                   help="treat DEP as absent, e.g. --without flashinfer-cubin; repeatable")
    g.add_argument("--linear-backend", metavar="NAME", help="vLLM --linear-backend")
    g.add_argument("--moe-backend", metavar="NAME", help="vLLM --moe-backend")
    g.add_argument("--attention-backend", metavar="NAME", help="vLLM/SGLang --attention-backend")
    g.add_argument("--engine-flag", action="append", type=_key_value, default=[], metavar="NAME=VALUE",
                   help="another engine flag the rules know, e.g. fp4_gemm_backend=marlin or dtype=fp8_e4m3")
    g.add_argument("--kv-cache-dtype", metavar="DTYPE", help="KV cache dtype passed to the engine")
    g.add_argument("--env", action="append", type=_key_value, default=[], metavar="KEY=VAL",
                   help="environment override, e.g. VLLM_DISABLED_KERNELS=CutlassInt8ScaledMMLinearKernel")
    g.add_argument("--tp", type=whole(1, MAX_GPUS), metavar="N", help="tensor-parallel size (default: --gpus)")
    g.add_argument("--ep", type=whole(1, MAX_GPUS), default=1, metavar="N", help="expert-parallel size (default: 1)")


def options_from_args(args):
    from advisor.kernel_path.options import InstallOptions

    facts: dict[str, bool] = {}
    if args.no_flashinfer:
        facts["flashinfer"] = False
    for f in args.with_deps:
        facts[f] = True
    for f in args.without_deps:
        facts[f] = False
    flags = []
    for name in ("linear_backend", "moe_backend", "attention_backend"):
        value = getattr(args, name)
        if value:
            flags.append((name, value))
    flags += [(k.replace("-", "_"), v) for k, v in args.engine_flag]
    labels = tuple(f"{'with' if v else 'without'} {k}" for k, v in facts.items())
    return InstallOptions(**facts, flags=tuple(flags), env=tuple(args.env),
                          kv_cache_dtype=args.kv_cache_dtype, tp=args.tp, ep=args.ep, labels=labels)


def run(args):
    from advisor.checkpoint.inspect import inspect_checkpoint
    from advisor.commands import Outcome
    from advisor.cost.feasibility import check_tp
    from advisor.doc import Doc, Paragraph
    from advisor.errors import EXIT_OK, EXIT_UNSUPPORTED
    from advisor.jsonout import document
    from advisor.kernel_path.default_install import install_payload
    from advisor.kernel_path.explain import explain, explain_all_gpus
    from advisor.kernel_path.render import all_gpus_doc, explanation_doc, options_payload
    from advisor.kernel_path.rule_versions import parse_engine_spec

    engine, version = parse_engine_spec(args.engine)
    options = options_from_args(args)
    info = inspect_checkpoint(args.checkpoint)
    if args.all_gpus:
        check_tp(args.tp, args.gpus or 1, info.arch)
        from advisor.gpu_table import load_gpu_table

        table = load_gpu_table()
        exps = explain_all_gpus(info, engine, version=version, options=options, gpus=args.gpus or 1, table=table)
        payload: dict[str, Any] = {"checkpoint": info.source, "options": options_payload(options),
                                   "explanations": exps}
        return Outcome(json=document("explain-all-gpus", payload), doc=all_gpus_doc(exps, table, info),
                       exit_code=EXIT_OK)
    from advisor.commands._args import NO_GPU_WHAT_IF, selection_from_args

    sel = selection_from_args(args, what_if=True)
    check_tp(args.tp, sel.count, info.arch)
    exp = explain(info, sel.spec, gpus=sel.count, engine=engine, version=version, options=options)
    payload = {"checkpoint": info.source, "gpu_selection": {"id": sel.spec.id, "count": sel.count,
                                                            "source": sel.source, "note": sel.note},
               "options": options_payload(options), "explanation": exp,
               "install": install_payload(options, exp.engine, exp.engine_version)}
    doc = explanation_doc(exp, sel.spec, info, options)
    if sel.note.startswith(NO_GPU_WHAT_IF):
        doc = Doc((Paragraph(sel.note, "warn"),)) + doc
    ignored = _ignored_env(engine, version, options)
    if ignored:
        text = (f"--env {', '.join(ignored)}: not modelled by the advisor's {exp.engine} {exp.engine_version} "
                "rules, so this answer does not reflect it")
        payload["ignored_env"] = list(ignored)
        payload["warnings"] = [text]
        doc = Doc((Paragraph("warning: " + text, "warn"),)) + doc
    engine_fails = any(not d.runs and not (d.error or "").startswith("no rule:") for d in exp.decisions)
    return Outcome(json=document("explain", payload), doc=doc,
                   exit_code=EXIT_UNSUPPORTED if engine_fails else EXIT_OK)


def _ignored_env(engine, version, options) -> tuple[str, ...]:
    from advisor.kernel_path.env_names import ignored_env
    from advisor.kernel_path.rule_files import load_rules

    return ignored_env(load_rules(engine, version)[0], options.env) if options.env else ()
