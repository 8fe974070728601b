"""`nvfp4-advisor tui [CHECKPOINT]`: open the interactive advisor on a checkpoint / GPU choice.

Running `nvfp4-advisor` with no command does the same with the remembered (or demo) choices.
"""

from __future__ import annotations

NAME = "tui"
HELP = "open the interactive advisor (the default without a command) on a checkpoint and GPU"
ORDER = 5


def add_arguments(parser) -> None:
    parser.add_argument("checkpoint", nargs="?", metavar="CHECKPOINT",
                        help="folder, .safetensors file, hub id org/name[@rev] or demo:NAME (default: last used)")
    parser.add_argument("--gpu", metavar="ID", help="plan for this GPU table id (default: probed card, else last used)")
    parser.add_argument("--gpus", metavar="N", type=int, help="number of identical cards (tensor parallel)")
    from advisor import engines

    parser.add_argument("--engine", choices=engines.tuned(), help="engine whose rules to explain")


def run(args):
    from advisor.commands import Outcome
    from advisor.doc import Doc
    from advisor.errors import UsageError
    from advisor.jsonout import document

    if args.json:
        raise UsageError("the TUI has no --json output; use inspect/explain/plan --json")
    gpu = None
    if args.gpu:
        from advisor.gpu_table import get_gpu

        gpu = get_gpu(args.gpu).id   # RTX3090 -> rtx-3090; a bad id is a one-line usage error before the screen opens
    if args.gpus is not None and args.gpus < 1:
        raise UsageError(f"--gpus must be at least 1 (got {args.gpus})")
    from advisor.tui import run_app

    code = run_app(checkpoint=args.checkpoint, gpu=gpu, gpus=args.gpus, engine=args.engine)
    return Outcome(json=document("tui", {}), doc=Doc(), exit_code=code)
