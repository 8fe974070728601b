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
    from advisor.checkpoint.report import to_payload
    from advisor.commands import Outcome
    from advisor.jsonout import document

    info = inspect_checkpoint(args.checkpoint)
    payload = document("inspect", to_payload(info))
    if getattr(args, "json", False):
        # advisor.cli prints only the JSON document for --json (cli._show on this same args.json): the
        # rendered document is not built, nor advisor.doc imported (1.5 ms of a cold `inspect --json`).
        return Outcome(json=payload, doc=None)
    from advisor.checkpoint.report import to_doc

    return Outcome(json=payload, doc=to_doc(info))
