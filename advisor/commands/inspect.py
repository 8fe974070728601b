"""`nvfp4-advisor inspect CHECKPOINT`: what a checkpoint really is, per module, from configs and headers."""

from __future__ import annotations

NAME = "inspect"
HELP = "classify a checkpoint per module (folder, .safetensors file, hub id org/name[@rev], demo:NAME)"
ORDER = 30


def add_arguments(parser) -> None:
    from advisor.commands._args import add_checkpoint_argument

    add_checkpoint_argument(parser)


def run(args):
    from advisor.checkpoint.inspect import inspect_checkpoint
    from advisor.checkpoint.report import to_doc, to_payload
    from advisor.commands import Outcome
    from advisor.jsonout import document

    info = inspect_checkpoint(args.checkpoint)
    return Outcome(json=document("inspect", to_payload(info)), doc=to_doc(info))
