"""`nvfp4-advisor convert SRC DST`: BF16/FP16 safetensors -> NVFP4 in ModelOpt's layout."""

from __future__ import annotations

import re

NAME = "convert"
HELP = ("convert a BF16/FP16 checkpoint to NVFP4 (ModelOpt layout, bit-exact with ModelOpt 0.47); "
        "--dequantized: a quantized checkpoint to BF16")
ORDER = 90


def _size(text: str) -> int:
    mt = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(B|KB|MB|GB|TB|KiB|MiB|GiB|TiB)?\s*", text, re.I)
    if not mt:
        import argparse

        raise argparse.ArgumentTypeError(f"not a size: {text!r} (e.g. 10GB, 500MB)")
    unit = (mt.group(2) or "B").upper()
    mult = {"B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12,
            "KIB": 2**10, "MIB": 2**20, "GIB": 2**30, "TIB": 2**40}[unit]
    size = int(float(mt.group(1)) * mult)
    if size < 1:
        import argparse

        raise argparse.ArgumentTypeError(f"a shard must hold at least 1 byte, got {text!r}")
    return size


def add_arguments(parser) -> None:
    from advisor.commands._args import whole

    parser.add_argument("source", metavar="SRC", help="BF16/FP16 safetensors checkpoint folder (never written)")
    parser.add_argument("destination", metavar="DST", help="output folder (must not exist or be empty)")
    parser.add_argument("--reference", metavar="REF",
                        help="a ModelOpt NVFP4 checkpoint of the same model: its quantized/kept choices, "
                             "fused groups, input scales, configs and sharding win")
    parser.add_argument("--format", choices=["modelopt"], default="modelopt", help="output layout (modelopt)")
    parser.add_argument("--dequantized", action="store_true",
                        help="the other way: write a BF16 copy of a quantized SRC (NVFP4, MXFP4, FP8, INT4/INT8) "
                             "with every weight dequantized, so any engine serves the quantized weights in BF16")
    parser.add_argument("--weight-only", action="store_true",
                        help="W4A16_NVFP4: no input_scale tensors (default NVFP4 with input_scale 1.0)")
    # one pattern per flag: with nargs="+" a leading `--keep P SRC DST` swallowed SRC and DST
    parser.add_argument("--keep", metavar="PATTERN", action="append", default=[],
                        help="module-name pattern (fnmatch, e.g. '*mlp.down_proj') kept in original "
                             "precision; repeat for more")
    parser.add_argument("--max-shard-size", type=_size, default=10 * 10**9, metavar="SIZE",
                        help="shard size limit without a reference (default 10GB)")
    parser.add_argument("--jobs", "-j", "--threads", dest="jobs", type=whole(1, 1024), default=None, metavar="N",
                        help="tensors (and row ranges of large ones) converted in parallel (default: the CPU count)")


def _progress(args, title: str = "convert"):
    """(callback for the converter, the bar to close): bytes done of the total, the stage as the phase
    (advisor.progress: rich.progress in a terminal, a line per stage otherwise, nothing with --json)."""
    from advisor.progress import Step, bar_for

    bar = bar_for(args, title, lines_off_terminal=False)
    words = {"scan": "scanning amax", "compare": "comparing"}

    def show(stage: str, done: int, total: int, name: str) -> None:
        bar(Step(done, total, "B", words.get(stage, "writing")))

    return show, bar


class _TermAsExit:
    """SIGTERM (kill, systemd, a closing terminal's job control) unwinds like Ctrl-C, so the
    partial output folder is removed instead of left behind by Python's default handler."""

    def __enter__(self):
        import signal
        import threading

        self._old = None
        if threading.current_thread() is threading.main_thread():
            def stop(signum, frame):
                raise SystemExit(128 + signum)
            self._old = signal.signal(signal.SIGTERM, stop)
        return self

    def __exit__(self, *exc):
        import signal

        if self._old is not None:
            signal.signal(signal.SIGTERM, self._old)


def run(args):
    from pathlib import Path

    from advisor.commands import Outcome
    from advisor.convert.converter import convert, default_jobs
    from advisor.convert.plan import Options
    from advisor.convert.report import convert_doc, convert_payload
    from advisor.errors import UsageError
    from advisor.jsonout import document

    if args.dequantized:
        return _run_dequantized(args)
    jobs = args.jobs if args.jobs is not None else default_jobs()
    if jobs < 1:
        raise UsageError("--jobs must be at least 1")
    options = Options(weight_only=args.weight_only, keep=tuple(args.keep),
                      max_shard_bytes=args.max_shard_size, threads=jobs)
    show, bar = _progress(args)
    with _TermAsExit():
        try:
            result = convert(Path(args.source), Path(args.destination),
                             reference=Path(args.reference) if args.reference else None, options=options,
                             progress=show)
        finally:
            bar.close()
    return Outcome(json=document("convert", convert_payload(result)), doc=convert_doc(result))


def _run_dequantized(args):
    from pathlib import Path

    from advisor.commands import Outcome
    from advisor.quality.dequantized_copy import dequantize_checkpoint
    from advisor.doc import Bullets, Doc, Heading, KeyValues, Paragraph
    from advisor.errors import UsageError
    from advisor.jsonout import document

    clash = [flag for flag, on in (("--reference", args.reference), ("--weight-only", args.weight_only),
                                   ("--keep", args.keep)) if on]
    if clash:
        raise UsageError(f"--dequantized writes BF16: {clash[0]} does not apply")
    show, bar = _progress(args)
    with _TermAsExit():
        try:
            r = dequantize_checkpoint(Path(args.source), Path(args.destination), max_shard_bytes=args.max_shard_size,
                                      progress=show)
        finally:
            bar.close()
    doc = Doc((
        Heading(f"Dequantized: {r['source']} -> {r['destination']}"),
        Paragraph(f"{r['dequantized']} quantized weight(s) written as BF16; scales, zero points and the "
                  "quantization config dropped; every other tensor and file copied unchanged.", "good"),
        KeyValues((("formats", ", ".join(r["formats"])), ("output", f"{r['output_bytes'] / 1e6:.1f} MB in "
                                                                      f"{len(r['files'])} file(s)"),
                   ("time", f"{r['seconds']:.1f} s"))),
        *((Bullets(tuple(r["notes"]), title="Notes", style="warn"),) if r["notes"] else ()),
        Paragraph(f"serve it as the reference: nvfp4-advisor launch {r['destination']} --engine ..., then "
                  "nvfp4-advisor bench --url CANDIDATE --reference-url REFERENCE", "dim"),
    ))
    return Outcome(json=document("convert", {"mode": "dequantized", **r}), doc=doc)
