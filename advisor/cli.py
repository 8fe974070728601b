"""Command-line entry point: argparse dispatch, then the outcome printed as JSON or drawn with Rich.

Commands (advisor/commands/) call the application layer (advisor/services/) and return a
renderer-neutral document (advisor.doc) plus a JSON document; advisor.rich_render draws the former
for this module and the TUI alike.
"""

from __future__ import annotations

import argparse
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


class _TerminalWidth:
    """HelpFormatter mixin: the terminal width (shutil.get_terminal_size(), argparse's own default) is looked up
    when help or --version text is laid out, not when the formatter is made. argparse makes one for every
    add_argument (its metavar check): that imported shutil (and bz2, lzma) into every command, `--json` ones too.
    The same width, position and text as argparse's; an explicit width is used as given."""

    def __init__(self, prog, indent_increment=2, max_help_position=24, width=None, **kwargs):
        self._asked = None if width is not None else (indent_increment, max_help_position)
        super().__init__(prog, indent_increment, max_help_position, 0 if width is None else width,  # type: ignore[call-arg]
                         **kwargs)

    def _resolve(self) -> None:
        if self._asked is not None:        # argparse's HelpFormatter.__init__, with width=None
            import shutil

            indent_increment, max_help_position = self._asked
            self._asked = None
            width = shutil.get_terminal_size().columns - 2
            self._max_help_position = min(max_help_position, max(width - 20, indent_increment * 2))
            self._width = width

    @property
    def _width(self) -> int:
        self._resolve()
        return self._width_value

    @_width.setter
    def _width(self, value: int) -> None:
        self._width_value = value

    @property
    def _max_help_position(self) -> int:
        self._resolve()
        return self._position_value

    @_max_help_position.setter
    def _max_help_position(self, value: int) -> None:
        self._position_value = value


class _HelpFormatter(_TerminalWidth, argparse.HelpFormatter):
    pass


class _RawDescriptionHelpFormatter(_TerminalWidth, argparse.RawDescriptionHelpFormatter):
    pass


class _Parser(argparse.ArgumentParser):
    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", _HelpFormatter)   # subcommands' parsers too (argparse's default)
        super().__init__(*args, **kwargs)

    def error(self, message: str):  # one line, exit 2, no usage dump wall
        raise ArgumentsRejected(f"{self.prog}: error: {message}")


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The parser; given ARGV, only the command it names gets its options (advisor.command_table)."""
    from advisor.command_table import add_subcommands

    parser = _Parser(
        prog="nvfp4-advisor",
        description="What your quantized LLM checkpoint really runs as on your NVIDIA GPU.",
        epilog=EPILOG,
        formatter_class=_RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"nvfp4-advisor {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    add_subcommands(sub, argv)
    return parser


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
            from advisor.rich_render import RichBar

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
        elif outcome.doc is None:       # a command leaves the document out only for --json
            raise RuntimeError("the command built no document to show")
        else:
            from advisor.rich_render import render, stdout_console

            render(outcome.doc, stdout_console())
    except BrokenPipeError:       # `| head` closed the pipe: the reader has what it wanted
        _pipe_closed()


def _pipe_closed() -> None:
    import os

    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())   # the exit-time flush goes nowhere


def _default(args) -> int:
    """No subcommand: the TUI in a terminal; piped or scripted, a plain answer on the demo."""
    if sys.stdin.isatty() and sys.stdout.isatty() and sys.stderr.isatty():   # Textual draws on stderr
        from advisor.tui import run_app

        return run_app()
    from advisor.rich_render import render, stdout_console
    from advisor.services import views
    from advisor.services.analysis import Selection, analyze

    probe = views.default_probe()
    gpu = views.probed_gpu_id(probe) or views.DEFAULT_GPU
    demo = f"demo:{views.demo_names()[0]}"
    try:
        render(views.plain_doc(probe, analyze(Selection(demo, gpu))), stdout_console())
    except BrokenPipeError:
        _pipe_closed()
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
