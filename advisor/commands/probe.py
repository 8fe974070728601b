"""`nvfp4-advisor probe`: the NVIDIA GPUs in this machine, matched to the GPU table."""

from __future__ import annotations

import argparse

from advisor.commands import Outcome
from advisor.commands._args import add_gpu_arguments

NAME = "probe"
HELP = "detect NVIDIA GPUs (NVML) and what their tensor cores support; --gpu ID for a what-if"
ORDER = 10


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_gpu_arguments(parser, default=None)


def run(args: argparse.Namespace) -> Outcome:
    from advisor.jsonout import document
    from advisor.probe import probe, resolve_gpus
    from advisor.probe.report import probe_doc, probe_payload

    result = probe()
    gpu, count = getattr(args, "gpu", None), getattr(args, "gpus", None)
    # --gpus alone means "N of the probed cards"; with no GPU here the output already says what to do.
    wanted = gpu is not None or (count is not None and result.devices)
    selection = resolve_gpus(result, gpu, count) if wanted else None
    return Outcome(
        json=document("probe", probe_payload(result, selection)),
        doc=probe_doc(result, selection),
        exit_code=0,
    )
