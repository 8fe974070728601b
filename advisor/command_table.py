"""The subcommands' names and one-line summaries, and the argparse parser built from them lazily.

Importing all 13 command modules to build every subparser took 0.48 s of a cold `plan` on a busy 2-core
machine (0.2 s with plan's module alone): only the chosen command's module is imported now. `--help` still
lists every command from this table; tests/architecture/test_command_table.py keeps it equal to each
module's NAME, HELP and ORDER.
"""

from __future__ import annotations

from typing import Sequence

# name -> one-line summary, in --help order (each module's ORDER).
COMMANDS: dict[str, str] = {
    "tui": "open the interactive advisor (the default without a command) on a checkpoint and GPU",
    "probe": "detect NVIDIA GPUs (NVML) and what their tensor cores support; --gpu ID for a what-if",
    "gpus": "list the GPU table: specs and dense tensor peaks per format (filter by --arch, --cc-min/--cc-max, "
            "--segment)",
    "inspect": "classify a checkpoint per module (folder, .safetensors file, hub id org/name[@rev], demo:NAME)",
    "explain": "which kernel an engine runs for each layer class of a checkpoint on a GPU, and why",
    "plan": "predict decode/prefill speed and KV memory for the real kernel path; recommend serve settings",
    "launch": "generate, start and supervise an engine server (vllm, sglang, fastllm, llamacpp, trtllm, "
              "transformers)",
    "bench": "benchmark a server on 127.0.0.1 (TTFT, ITL, tokens/s, concurrency, prefill) vs the plan",
    "microbench": "measure what this GPU achieves per kernel class (Triton) and save a calibration for plan",
    "report": "write a compatibility report (Markdown, JSON or HTML) for a checkpoint, optionally across many "
              "GPUs",
    "convert": "convert a BF16/FP16 checkpoint to NVFP4 (ModelOpt layout, bit-exact with ModelOpt 0.47); "
               "--dequantized: a quantized checkpoint to BF16",
    "verify": "compare an NVFP4 checkpoint (or a BF16 one, converted first) byte for byte with a reference",
    "quality": "weight error of a quantized checkpoint against its BF16 original (SNR, cosine, broken scale "
               "groups)",
}

# Top-level options that end parsing before any subcommand is looked at.
_TOP_LEVEL_EXITS = ("-h", "--help", "--version")


def chosen(argv: Sequence[str]) -> tuple[str, ...] | None:
    """The commands whose options the parser needs for ARGV: the one named first, none for a bare
    call / --help / --version; None (every discovered command, argparse then words any error exactly
    as before) for anything else."""
    if not argv or argv[0] in _TOP_LEVEL_EXITS:
        return ()
    if argv[0] in COMMANDS:
        return (argv[0],)
    return None


def add_subcommands(sub, argv: Sequence[str] | None) -> None:
    """Every command gets its subparser (so --help and 'invalid choice' list them all); only those
    ARGV needs (all of them without ARGV) get their options and module."""
    names = None if argv is None else chosen(argv)
    if names is None:
        from advisor import commands

        for mod in commands.discover():
            _add(sub, mod.NAME, mod.HELP, mod)
        return
    for name, summary in COMMANDS.items():
        _add(sub, name, summary, _module(name) if name in names else None)


def _module(name: str):
    import importlib

    return importlib.import_module(f"advisor.commands.{name}")


def _add(sub, name: str, summary: str, mod) -> None:
    p = sub.add_parser(name, help=summary, description=summary)
    if mod is None:
        return
    p.add_argument("--json", action="store_true", help="machine-readable output (stable keys, schema_version)")
    mod.add_arguments(p)
    p.set_defaults(_module=mod)
