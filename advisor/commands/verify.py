"""`nvfp4-advisor verify [CANDIDATE] --reference REF`: byte-for-byte check against a ModelOpt NVFP4
reference. Without CANDIDATE: dequantize the reference, requantize it, compare with itself."""

from __future__ import annotations

NAME = "verify"
HELP = "compare an NVFP4 checkpoint (or a BF16 one, converted first) byte for byte with a reference"
ORDER = 91


def add_arguments(parser) -> None:
    from advisor.commands._args import whole

    parser.add_argument("candidate", metavar="CANDIDATE", nargs="?",
                        help="NVFP4 folder to check, or a BF16 folder to convert and check; "
                             "omit it to round-trip the reference through dequantize + requantize")
    parser.add_argument("--reference", metavar="REF", required=True, help="ModelOpt NVFP4 checkpoint folder")
    parser.add_argument("--threads", type=whole(1, 1024), default=None, metavar="N",
                        help="worker threads (default: CPU count, at most 8)")


def run(args):
    import os
    from pathlib import Path

    from advisor.commands import Outcome
    from advisor.commands.convert import _progress, _TermAsExit
    from advisor.convert.report import verify_doc, verify_payload
    from advisor.convert.verify import verify
    from advisor.errors import EXIT_FAILURE, EXIT_OK
    from advisor.jsonout import document

    threads = max(1, args.threads if args.threads is not None else min(8, os.cpu_count() or 1))
    with _TermAsExit():
        show, bar = _progress(args, "verify")
        try:
            rep = verify(Path(args.candidate) if args.candidate else None, Path(args.reference), threads=threads,
                         progress=show)
        finally:
            bar.close()
    return Outcome(json=document("verify", verify_payload(rep)), doc=verify_doc(rep),
                   exit_code=EXIT_OK if rep.identical else EXIT_FAILURE)
