"""Command-line entry point: argparse dispatch and Rich rendering of core results.

This module and advisor/tui/ are the only places that import Rich; commands return
renderer-neutral documents (advisor.doc) plus a JSON document.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from typing import Sequence

from advisor import __version__
from advisor.errors import EXIT_BAD_INPUT, EXIT_FAILURE, EXIT_INTERRUPTED, EXIT_USAGE, AdvisorError

EPILOG = """exit codes: 0 ok, 1 action failed, 2 usage error, 3 bad input (file/profile),
4 unsupported combination, 130 interrupted.
Run without a subcommand to open the interactive advisor (TUI)."""


class ArgumentsRejected(SystemExit):
    """argparse refused the command line: main() prints the one line (and the --json error document)."""

    def __init__(self, message: str):
        super().__init__(EXIT_USAGE)
        self.message = message


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, exit 2, no usage dump wall
        raise ArgumentsRejected(f"{self.prog}: error: {message}")


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The parser; given ARGV, only the command it names gets its options (advisor.command_table)."""
    from advisor.command_table import add_subcommands

    parser = _Parser(
        prog="nvfp4-advisor",
        description="What your quantized LLM checkpoint really runs as on your NVIDIA GPU.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"nvfp4-advisor {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    add_subcommands(sub, argv)
    return parser


# ---------------------------------------------------------------- rendering (Rich)
_STYLES = {"normal": "", "good": "green", "bad": "bold red", "warn": "yellow", "dim": "dim", "accent": "bold cyan",
           "code": "cyan"}


def renderables(doc):
    """Rich renderables for a Doc, one per block (shared by the CLI and the TUI).

    Every string becomes a ``Text`` (Rich never reads markup in it: a tensor named ``[bold]x[/]``
    shows as written) and goes through advisor.untrusted (escape sequences, control characters and
    bidi overrides from a checkpoint or a server show as escapes). Line breaks stay where a block may
    hold several lines (paragraphs, cells, items); headings and titles are one line."""
    from rich.table import Table as RTable
    from rich.text import Text

    from advisor import doc as d
    from advisor.untrusted import printable

    def text(s, style="", **kw) -> Text:
        return Text(printable(str(s), multiline=True), style=style, **kw)

    def title(s, style=""):
        return Text(printable(str(s)), style=style) if s else None

    for block in doc.blocks:
        if isinstance(block, d.Heading):
            yield Text(printable(block.text), style="bold underline" if block.level == 1 else "bold")
        elif isinstance(block, d.Paragraph):
            if block.style == "code":   # a command to copy: never broken by Rich's wrapping
                yield text(block.text, _STYLES["code"], no_wrap=True, overflow="ignore")
            else:
                yield text(block.text, _STYLES.get(block.style, ""))
        elif isinstance(block, d.KeyValues):
            t = RTable(show_header=False, box=None, title=title(block.title), title_justify="left", pad_edge=False)
            t.add_column(style="bold", no_wrap=True)
            t.add_column(overflow="fold")
            for k, v in block.pairs:
                t.add_row(text(k), text(v))
            yield t
        elif isinstance(block, d.Table):
            t = RTable(title=title(block.title), title_justify="left", header_style="bold", expand=False)
            for c in block.columns:
                t.add_column(text(c), overflow="fold")
            for i, row in enumerate(block.rows):
                style = block.row_styles[i] if i < len(block.row_styles) else "normal"
                t.add_row(*(text(c) for c in row), style=_STYLES.get(style, ""))
            yield t
        elif isinstance(block, d.Bullets):
            # A grid keeps wrapped lines indented under their bullet.
            grid = RTable.grid(padding=(0, 1))
            grid.add_column(no_wrap=True)
            grid.add_column(overflow="fold")
            style = _STYLES.get(block.style, "")
            for item in block.items:
                grid.add_row(Text("  •", style=style), text(item, style))
            if block.title:
                from rich.console import Group

                yield Group(title(block.title, "bold"), grid)
            else:
                yield grid
        elif isinstance(block, d.Chart):
            t = RTable(title=title(block.title), title_justify="left", header_style="bold")
            t.add_column(text(block.x_label))
            for se in block.series:
                t.add_column(text(f"{se.label} ({block.y_label})" if block.y_label else se.label))
            xs = sorted({x for se in block.series for x in se.x})
            for x in xs:
                cells = []
                for se in block.series:
                    ys = [y for xx, y in zip(se.x, se.y) if xx == x]
                    cells.append(_num(ys[0]) if ys else "")
                t.add_row(_num(x), *cells)
            yield t
        elif isinstance(block, d.Heatmap):
            t = RTable(title=title(f"{block.title} ({block.unit})" if block.unit else block.title),
                       title_justify="left", header_style="bold")
            t.add_column("")
            for c in block.col_labels:
                t.add_column(text(c), justify="right")
            for label, row in zip(block.row_labels, block.values):
                t.add_row(text(label), *("✗" if v is None else _num(v) for v in row))
            yield t


class RichBar:
    """advisor.progress.Bar drawn with rich.progress on stderr: what runs now, the bar, done / total,
    elapsed time and the ETA from the rate seen so far."""

    def __init__(self, title: str):
        from rich.console import Console
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

        self.title = title
        self.progress = Progress(TextColumn("{task.description}"), BarColumn(bar_width=24),
                                 TextColumn("{task.fields[amount]}"), TimeElapsedColumn(), TextColumn("ETA"),
                                 TimeRemainingColumn(), console=Console(stderr=True), transient=True)
        self.task = self.progress.add_task(title, total=None, amount="")
        self.progress.start()

    def __call__(self, step) -> None:
        from advisor.progress import amount

        done = amount(step.done, step.unit, with_unit=step.total is None)
        shown = f"{done}/{amount(step.total, step.unit)}" if step.total else done
        label = f"{self.title}: {step.phase}" if step.phase else self.title
        self.progress.update(self.task, completed=step.done, total=step.total, description=label[:44].ljust(44),
                             amount=shown)

    def close(self) -> None:
        self.progress.stop()


def _num(v: float) -> str:
    if v == int(v) and abs(v) < 1e9:
        return str(int(v))
    return f"{v:.3g}" if abs(v) < 100 else f"{v:,.0f}"


def render(doc, console) -> None:
    for r in renderables(doc):
        console.print(r)
        console.print()


def _fail(message: str, code: int, json_out: bool = False, *, prefix: str = "nvfp4-advisor: error: ") -> int:
    """The one error line on stderr; with --json also the error document on stdout (same shape
    for every failure: argparse, AdvisorError, bad input, internal error, interrupt). The line is
    one line whatever a file name holds (advisor.untrusted); the JSON document keeps the data."""
    from advisor.untrusted import one_line

    if json_out:
        from advisor.jsonout import document, dumps

        try:
            _print_safe(dumps(document("error", {"error": message, "exit_code": code})), sys.stdout)
        except BrokenPipeError:   # `--json | head` closed the pipe: the line on stderr still tells
            _pipe_closed()
    _print_safe(f"{prefix}{one_line(message)}", sys.stderr)
    return code


def _print_safe(text: str, stream) -> None:
    """print(), but a stream that cannot encode a character (a C locale) gets an escape instead."""
    try:
        print(text, file=stream)
    except UnicodeEncodeError:
        print(text.encode(stream.encoding or "ascii", "backslashreplace").decode(stream.encoding or "ascii"),
              file=stream)


def _wants_json(argv: Sequence[str]) -> bool:
    """--json anywhere before a `--` (also when argparse rejected the line, so args never came)."""
    for a in argv:
        if a == "--":
            return False
        if a == "--json":
            return True
    return False


def main(argv: Sequence[str] | None = None) -> int:
    try:
        return _main(argv)
    finally:   # every exit (--help, --version, an answer, an error document) ends with its output flushed
        _flush_stdout()


def _flush_stdout() -> None:
    """Flush stdout now, while a closed pipe can still be met quietly: Python's own flush at exit
    would print "Exception ignored … BrokenPipeError" and exit 120 after `… | head` read its fill."""
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        _pipe_closed()


def _main(argv: Sequence[str] | None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    json_out = _wants_json(argv)
    parser = build_parser(argv)
    try:
        args = parser.parse_args(argv)
    except ArgumentsRejected as err:  # still a SystemExit(2), as argparse's own would be
        prog, _, message = err.message.partition(": error: ")
        raise SystemExit(_fail(message, EXIT_USAGE, json_out, prefix=f"{prog}: error: ")) from None
    json_out = json_out or bool(getattr(args, "json", False))
    mod = getattr(args, "_module", None)
    try:
        if mod is None:
            return _default(args)
        if not json_out and sys.stderr.isatty():
            args.progress = RichBar           # long commands draw their advisor.progress steps with it
        outcome = mod.run(args)
        _show(outcome, args.json)     # inside: a failure while printing is one line as well
    except AdvisorError as err:
        return _fail(str(err), err.exit_code, json_out)
    except KeyboardInterrupt:
        return _fail("interrupted", EXIT_INTERRUPTED, json_out)
    except (OSError, ValueError) as err:  # last line of defence: one line, never a traceback
        return _fail(f"{type(err).__name__}: {err}", EXIT_BAD_INPUT, json_out)
    except Exception as err:  # a bug of ours: still one line; NVFP4_ADVISOR_DEBUG=1 shows the traceback
        import os

        if os.environ.get("NVFP4_ADVISOR_DEBUG"):
            raise
        return _fail(f"internal error ({type(err).__name__}: {err}); rerun with NVFP4_ADVISOR_DEBUG=1 "
                     "and report it", EXIT_FAILURE, json_out)
    return outcome.exit_code


def _show(outcome, as_json: bool) -> None:
    try:
        if as_json:
            from advisor.jsonout import dumps

            _print_safe(dumps(outcome.json), sys.stdout)
        else:
            render(outcome.doc, _console())
    except BrokenPipeError:       # `| head` closed the pipe: the reader has what it wanted
        _pipe_closed()


def _console():
    """A Rich console for stdout. Rich's own answer to a closed pipe is exit status 1; ours is to
    stop writing and keep the command's status (`… | head` is not a failure)."""
    from rich.console import Console

    def closed() -> None:
        raise BrokenPipeError

    console = Console()
    console.on_broken_pipe = closed
    return console


def _pipe_closed() -> None:
    import os

    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())   # the exit-time flush goes nowhere


def _default(args) -> int:
    """No subcommand: the TUI in a terminal; piped or scripted, a plain answer on the demo."""
    if sys.stdin.isatty() and sys.stdout.isatty() and sys.stderr.isatty():   # Textual draws on stderr
        from advisor.tui import run_app

        return run_app()
    from advisor import views
    from advisor.analysis import Selection, analyze

    probe = views.default_probe()
    gpu = views.probed_gpu_id(probe) or views.DEFAULT_GPU
    demo = f"demo:{views.demo_names()[0]}"
    try:
        render(views.plain_doc(probe, analyze(Selection(demo, gpu))), _console())
    except BrokenPipeError:
        _pipe_closed()
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
