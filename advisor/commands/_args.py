"""Shared command-line arguments: `CHECKPOINT` and `--gpu ID|auto --gpus N` (probe, explain, plan, report, launch).

Parsing stays light (no table load, no NVML): the id is checked when the command runs, so a bad
id is one line and exit 2 (UsageError), and `--help` stays fast.
"""

from __future__ import annotations

import argparse


def _count(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number of GPUs, got {text!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"need at least 1 GPU, got {n}")
    return n


def add_gpu_arguments(parser: argparse.ArgumentParser, *, default: str | None = "auto") -> None:
    parser.add_argument(
        "--gpu", metavar="ID|auto", default=default,
        help="GPU table id (e.g. rtx-3090; list: nvfp4-advisor gpus) or 'auto' for the probed cards"
             + ("" if default is None else f" (default: {default})"),
    )
    parser.add_argument(
        "--gpus", metavar="N", type=_count, default=None,
        help="number of identical cards (default: all probed cards of that model, else 1)",
    )


def selection_from_args(args: argparse.Namespace, probe_result=None):
    """The planning set for a command; probes this machine unless a result is given."""
    from advisor.probe import probe, resolve_gpus

    if probe_result is None:
        probe_result = probe()
    return resolve_gpus(probe_result, getattr(args, "gpu", None), getattr(args, "gpus", None))


CHECKPOINT_HELP = "local folder, .safetensors file, hub id org/name[@revision], or demo:NAME"


def add_checkpoint_argument(parser: argparse.ArgumentParser) -> None:
    """The positional CHECKPOINT every analysing command takes (inspect, explain, plan, report)."""
    parser.add_argument("checkpoint", metavar="CHECKPOINT", help=CHECKPOINT_HELP)
