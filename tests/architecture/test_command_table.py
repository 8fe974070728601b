"""The lazily built parser (advisor.command_table): the table matches the command modules, --help lists
every command without importing any command module, and a command line parses as with every module loaded."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from advisor import commands
from advisor.cli import build_parser
from advisor.command_table import COMMANDS, chosen

ROOT = Path(__file__).resolve().parents[2]


def test_table_matches_the_command_modules():
    mods = commands.discover()
    assert list(COMMANDS) == [m.NAME for m in mods]          # same names, --help order (ORDER)
    assert {m.NAME: m.HELP for m in mods} == COMMANDS


def test_chosen_commands():
    assert chosen([]) == () and chosen(["--help"]) == () and chosen(["--version"]) == ()
    assert chosen(["plan", "demo:x", "--json"]) == ("plan",)
    assert chosen(["--json", "plan"]) is None and chosen(["fake"]) is None    # every discovered command, as before


def _modules_after(code: str) -> list[str]:
    proc = subprocess.run([sys.executable, "-c", code + "\nimport sys, json\n"
                           "print(json.dumps(sorted(m for m in sys.modules if m.startswith('advisor.commands.'))))"],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_top_level_help_lists_every_command_without_importing_them():
    code = ("import contextlib, io\nfrom advisor.cli import main\nbuf = io.StringIO()\n"
            "with contextlib.redirect_stdout(buf), contextlib.suppress(SystemExit):\n    main(['--help'])\n"
            "text = buf.getvalue()\n"
            "from advisor.command_table import COMMANDS\n"
            "assert all(name in text for name in COMMANDS), text\n")
    assert _modules_after(code) == []


def test_a_command_imports_only_its_own_module():
    code = "from advisor.cli import build_parser\nbuild_parser(['gpus', '--json']).parse_args(['gpus', '--json'])"
    assert _modules_after(code) == ["advisor.commands.gpus"]


@pytest.mark.parametrize("argv", [
    ["plan", "demo:qwen3-8b-nvfp4", "--gpu", "rtx-3090", "--engine", "sglang", "--json"],
    ["explain", "demo:qwen3-8b-nvfp4", "--gpu", "h100-sxm", "--all-gpus"],
    ["gpus", "--arch", "hopper"],
    ["launch", "demo:qwen3-8b-nvfp4", "--engine", "vllm", "--dry-run"],
])
def test_lazy_parse_equals_full_parse(argv):
    lazy, full = vars(build_parser(argv).parse_args(argv)), vars(build_parser().parse_args(argv))
    assert lazy == full


@pytest.mark.parametrize("argv", [["bogus"], ["plan"], ["plan", "x", "--bogus"], ["--json", "plan"]])
def test_rejections_word_as_the_full_parser(argv, capsys):
    from advisor.cli import ArgumentsRejected

    def message(parser) -> str:
        with pytest.raises(ArgumentsRejected) as err:
            parser.parse_args(argv)
        return err.value.message

    assert message(build_parser(argv)) == message(build_parser())
