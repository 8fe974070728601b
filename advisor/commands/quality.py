"""`nvfp4-advisor quality REFERENCE CANDIDATE`: did quantization hurt the weights? Every quantized
weight of CANDIDATE is dequantized with our own math and compared with the BF16 REFERENCE."""

from __future__ import annotations

NAME = "quality"
HELP = "weight error of a quantized checkpoint against its BF16 original (SNR, cosine, broken scale groups)"
ORDER = 92


def add_arguments(parser) -> None:
    parser.add_argument("reference", metavar="REFERENCE", help="the BF16/FP16 checkpoint folder it was made from")
    parser.add_argument("candidate", metavar="CANDIDATE",
                        help="quantized checkpoint folder: NVFP4 (ModelOpt, compressed-tensors), FP8 per-tensor/"
                             "channel/block, MXFP4, INT4/INT8 (GPTQ, AWQ, pack-quantized)")
    parser.add_argument("--all", action="store_true", help="list every tensor, not only the worst ten")


def run(args):
    from pathlib import Path

    from advisor.commands import Outcome
    from advisor.commands.convert import _progress, _TermAsExit
    from advisor.errors import EXIT_FAILURE, EXIT_OK
    from advisor.jsonout import document
    from advisor.quality.compare import compare
    from advisor.quality.report import quality_doc, quality_payload

    show, bar = _progress(args, "quality")           # the shared bar (advisor.progress), as convert
    with _TermAsExit():
        try:
            rep = compare(Path(args.reference), Path(args.candidate), progress=show)
        finally:
            bar.close()
    return Outcome(json=document("quality", quality_payload(rep)), doc=quality_doc(rep, all_tensors=args.all),
                   exit_code=EXIT_FAILURE if rep.verdict.status == "broken" else EXIT_OK)
