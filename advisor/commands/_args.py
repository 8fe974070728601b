"""Shared command-line arguments: `CHECKPOINT` and `--gpu ID|auto --gpus N` (probe, explain, plan, report, launch).

Parsing stays light (no table load, no NVML): the id is checked when the command runs, so a bad
id is one line and exit 2 (UsageError), and `--help` stays fast.
"""

from __future__ import annotations

import argparse


MAX_GPUS = 1024


def _count(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number of GPUs, got {text!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"need at least 1 GPU, got {n}")
    if n > MAX_GPUS:
        raise argparse.ArgumentTypeError(f"at most {MAX_GPUS} GPUs, got {n}")
    return n


def number(lo: float = 0.0, hi: float | None = None, *, lo_ok: bool = False, what: str = "positive number"):
    """argparse `type=` for a float that must be finite and within (lo, hi] ([lo, hi] with lo_ok):
    nan/inf/1e308 stop here with exit 2 instead of failing deep inside the cost model."""
    import math

    def parse(text: str) -> float:
        try:
            v = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
        if not math.isfinite(v) or v < lo or (v == lo and not lo_ok):
            raise argparse.ArgumentTypeError(f"must be a finite {what}, got {text!r}")
        if hi is not None and v > hi:
            raise argparse.ArgumentTypeError(f"must be at most {hi:g}, got {text!r}")
        return v

    parse.__name__ = "number"
    return parse


def whole(lo: int = 1, hi: int | None = None):
    """argparse `type=` for an int within [lo, hi] (exit 2 outside)."""

    def parse(text: str) -> int:
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
        if v < lo or (hi is not None and v > hi):
            bound = f"from {lo} to {hi}" if hi is not None else f"at least {lo}"
            raise argparse.ArgumentTypeError(f"must be {bound}, got {v}")
        return v

    parse.__name__ = "whole"
    return parse


def add_gpu_arguments(parser: argparse.ArgumentParser, *, default: str | None = "auto", what_if: bool = False) -> None:
    """``what_if``: without --gpu, the probed cards, else the what-if card the TUI starts on (said in
    the output); an explicit ``--gpu auto`` still insists on a probed card."""
    from advisor.gpu_table import WHAT_IF_GPU

    if what_if:
        default, shown = None, f" (default: the probed cards; with none, {WHAT_IF_GPU} as a what-if)"
    else:
        shown = "" if default is None else f" (default: {default})"
    parser.add_argument(
        "--gpu", metavar="ID|auto", default=default,
        help="GPU table id (e.g. rtx-3090, RTX3090 or 3090; list: nvfp4-advisor gpus) or 'auto' for the probed cards"
             + shown,
    )
    parser.add_argument(
        "--gpus", metavar="N", type=_count, default=None,
        help="number of identical cards (default: all probed cards of that model, else 1)",
    )


def selection_from_args(args: argparse.Namespace, probe_result=None, *, what_if: bool = False):
    """The planning set for a command; probes this machine unless a result is given. ``what_if``:
    no --gpu and no card here plans for WHAT_IF_GPU, and the selection's note says so."""
    from dataclasses import replace

    from advisor.probe import probe, resolve_gpus
    from advisor.gpu_table import WHAT_IF_GPU

    if probe_result is None:
        probe_result = probe()
    gpu, count = getattr(args, "gpu", None), getattr(args, "gpus", None)
    if gpu is None and what_if and not getattr(probe_result, "devices", ()):
        sel = resolve_gpus(probe_result, WHAT_IF_GPU, count)
        return replace(sel, note=f"{NO_GPU_WHAT_IF}: {sel.count} x {sel.spec.name} as a what-if; "
                                 "pass --gpu ID for your card")
    return resolve_gpus(probe_result, gpu, count)


NO_GPU_WHAT_IF = "No GPU here and no --gpu"


CHECKPOINT_HELP = "local folder, .safetensors file, hub id org/name[@revision], or demo:NAME"


def add_checkpoint_argument(parser: argparse.ArgumentParser) -> None:
    """The positional CHECKPOINT every analysing command takes (inspect, explain, plan, report)."""
    parser.add_argument("checkpoint", metavar="CHECKPOINT", help=CHECKPOINT_HELP)
