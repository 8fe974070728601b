"""`nvfp4-advisor convert SRC DST`: BF16/FP16 safetensors -> NVFP4 in ModelOpt's layout."""

from __future__ import annotations

import re

NAME = "convert"
HELP = "convert a BF16/FP16 checkpoint to NVFP4 (ModelOpt layout, bit-exact with ModelOpt 0.47)"
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
    parser.add_argument("--weight-only", action="store_true",
                        help="W4A16_NVFP4: no input_scale tensors (default NVFP4 with input_scale 1.0)")
    # one pattern per flag: with nargs="+" a leading `--keep P SRC DST` swallowed SRC and DST
    parser.add_argument("--keep", metavar="PATTERN", action="append", default=[],
                        help="module-name pattern (fnmatch, e.g. '*mlp.down_proj') kept in original "
                             "precision; repeat for more")
    parser.add_argument("--max-shard-size", type=_size, default=10 * 10**9, metavar="SIZE",
                        help="shard size limit without a reference (default 10GB)")
    parser.add_argument("--threads", type=whole(1, 1024), default=None, metavar="N",
                        help="worker threads (default: CPU count, at most 8)")


def progress_line(stage: str, done: int, total: int, name: str, width: int) -> str:
    """One status line that never reaches the last column (a wrapped line breaks the \\r redraw)."""
    pct = 100 * done / total if total else 100
    label = "scanning amax" if stage == "scan" else "writing"
    head = f"{label:13s} {pct:5.1f}%  {done / 1e9:.2f}/{total / 1e9:.2f} GB  "
    room = max(0, width - 1 - len(head))
    tail = name if len(name) <= room else ("..." + name[-(room - 3):] if room > 3 else "")
    return (head + tail).ljust(width - 1)[: width - 1]


def terminal_width(stream, default: int = 80) -> int:
    """Columns of the terminal `stream` writes to (the progress goes to stderr, and stdout is
    often redirected, so shutil.get_terminal_size's stdout-based answer can be the wrong one)."""
    import os

    try:
        return int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        pass
    try:
        return os.get_terminal_size(stream.fileno()).columns or default
    except (OSError, ValueError, AttributeError):
        return default


def _progress_printer():
    import sys
    import time

    if not sys.stderr.isatty():
        return None
    last = [0.0]

    def show(stage: str, done: int, total: int, name: str) -> None:
        now = time.monotonic()
        if now - last[0] < 0.2 and done < total:
            return
        last[0] = now
        width = terminal_width(sys.stderr)
        sys.stderr.write("\r" + progress_line(stage, done, total, name, width))
        if stage == "write" and done >= total:
            sys.stderr.write("\n")
        sys.stderr.flush()
    return show


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
    import os
    from pathlib import Path

    from advisor.commands import Outcome
    from advisor.convert.converter import convert
    from advisor.convert.plan import Options
    from advisor.convert.report import convert_doc, convert_payload
    from advisor.errors import UsageError
    from advisor.jsonout import document

    threads = args.threads if args.threads is not None else min(8, os.cpu_count() or 1)
    if threads < 1:
        raise UsageError("--threads must be at least 1")
    options = Options(weight_only=args.weight_only, keep=tuple(args.keep),
                      max_shard_bytes=args.max_shard_size, threads=threads)
    with _TermAsExit():
        result = convert(Path(args.source), Path(args.destination),
                         reference=Path(args.reference) if args.reference else None, options=options,
                         progress=None if args.json else _progress_printer())
    return Outcome(json=document("convert", convert_payload(result)), doc=convert_doc(result))
