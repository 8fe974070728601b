"""`inspect --json` imports only what it uses (issue 23 point 1: its cold start is most of its CPU on a
small checkpoint), with the same answers as before:

- argparse's help formatters look the terminal width up when help is laid out (advisor.cli._TerminalWidth),
  not for each add_argument: the same help and --version text as argparse's own formatters at any COLUMNS;
- the cache dir is platformdirs' answer, computed without importing platformdirs where every 4.x agrees
  (advisor.profile_cache.user_cache_dir): the same directory in every environment tried here;
- `inspect --json` builds no rendered document (advisor.doc is not imported).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT

import advisor.cli as cli
from advisor import command_table, profile_cache

STOCK = {cli._HelpFormatter: argparse.HelpFormatter,
         cli._RawDescriptionHelpFormatter: argparse.RawDescriptionHelpFormatter}


def _parsers(parser: argparse.ArgumentParser):
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from _parsers(sub)


@pytest.mark.parametrize("columns", ["1", "10", "30", "45", "80", "100", "200"])
@pytest.mark.parametrize("argv", [None, [], ["inspect"], ["plan"], ["explain"], ["launch"], ["gpus"]])
def test_help_is_argparse_own_at_any_width(monkeypatch, columns, argv):
    monkeypatch.setenv("COLUMNS", columns)
    parser = cli.build_parser(argv)
    seen = 0
    for p in _parsers(parser):
        assert p.formatter_class in STOCK
        ours = (p.format_help(), p.format_usage())
        p.formatter_class = STOCK[p.formatter_class]
        assert (p.format_help(), p.format_usage()) == ours
        seen += 1
    assert seen == 1 + len(command_table.COMMANDS)


def test_an_explicit_width_is_kept(monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    parser = cli.build_parser(["plan"])
    sub = next(p for p in _parsers(parser) if p.prog.endswith(" plan"))
    for width in (30, 60, 120):
        ours = cli._HelpFormatter(sub.prog, width=width)
        stock = argparse.HelpFormatter(sub.prog, width=width)
        for f in (ours, stock):
            f.add_usage(sub.usage, sub._actions, sub._mutually_exclusive_groups)
            for group in sub._action_groups:
                f.start_section(group.title)
                f.add_arguments(group._group_actions)
                f.end_section()
        assert ours.format_help() == stock.format_help()


def test_version_text_is_argparse_own(monkeypatch, capsys):
    monkeypatch.setenv("COLUMNS", "12")     # --version text is filled to the width, too
    texts = []
    for cls in (cli._RawDescriptionHelpFormatter, argparse.RawDescriptionHelpFormatter):
        parser = cli.build_parser(["--version"])
        parser.formatter_class = cls
        with pytest.raises(SystemExit):
            parser.parse_args(["--version"])
        texts.append(capsys.readouterr().out)
    assert texts[0] == texts[1] and "nvfp4-advisor" in texts[0]


ENVIRONMENTS = [
    {"HOME": "/home/u"},
    {"HOME": "/home/u/"},
    {"HOME": "/"},
    {"HOME": "//h"},
    {"HOME": "/home/u", "XDG_CACHE_HOME": ""},
    {"HOME": "/home/u", "XDG_CACHE_HOME": "/x/cache"},
    {"HOME": "/home/u", "XDG_CACHE_HOME": "/x/cache/"},
    {"HOME": "/home/u", "XDG_CACHE_HOME": "/"},
    {"HOME": "/home/u", "XDG_CACHE_HOME": "/x /sp ace "},
    {"HOME": "/home/u", "XDG_CACHE_HOME": "rel/cache"},
    {"HOME": "/home/u", "XDG_CACHE_HOME": "   "},
    {"HOME": "/home/u", "XDG_CACHE_HOME": "~/c"},
    {"HOME": "rel", "XDG_CACHE_HOME": "/x"},
    {"XDG_CACHE_HOME": "/x"},
    {},
    {"HOME": ""},
    {"HOME": "rel"},
    {"HOME": "~"},
    {"HOME": "/home/u", "ANDROID_DATA": "/data", "ANDROID_ROOT": "/system"},
]


@pytest.mark.parametrize("env", ENVIRONMENTS, ids=lambda e: json.dumps(e))
def test_cache_dir_is_platformdirs_own(monkeypatch, env):
    import platformdirs

    for name in ("HOME", "XDG_CACHE_HOME", "ANDROID_DATA", "ANDROID_ROOT"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)

    def answer(fn):
        try:
            return fn()
        except Exception as err:        # platformdirs refuses a home it cannot resolve: so must we
            return type(err)

    assert answer(profile_cache.user_cache_dir) == answer(lambda: platformdirs.user_cache_dir("nvfp4-advisor"))


def test_cache_dir_fast_cases_import_no_platformdirs(tmp_path):
    probe = ("import sys; from advisor import profile_cache as p; print(p.cache_dir()); "
             "print('platformdirs' in sys.modules)")
    for extra, expected in (({"XDG_CACHE_HOME": str(tmp_path / "c")}, tmp_path / "c"),
                            ({}, tmp_path / "home" / ".cache")):
        env = {k: v for k, v in os.environ.items() if k not in ("XDG_CACHE_HOME", "ANDROID_DATA", "ANDROID_ROOT")}
        env.update(HOME=str(tmp_path / "home"), PYTHONPATH=str(ROOT), **extra)
        out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True)
        assert out.stdout.split("\n")[:2] == [str(expected / "nvfp4-advisor" / "parsed"), str(sys.platform != "linux")]


LEAN = ("import sys; from advisor.cli import main; code = main(sys.argv[1:]); "
        "print(sorted(m for m in ('shutil', 'tempfile', 'platformdirs', 'advisor.doc', 'advisor.rich_render', "
        "'bz2', 'lzma') if m in sys.modules), code, file=sys.stderr)")


@pytest.mark.skipif(sys.platform != "linux", reason="the platformdirs-free cache dir is Linux's")
def test_inspect_json_imports_no_renderer_and_no_shutil(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("XDG_CACHE_HOME", "COLUMNS")}
    env.update(HOME=str(tmp_path), PYTHONPATH=str(ROOT), HF_HUB_OFFLINE="1")
    runs = {}
    for args in (["inspect", "demo:qwen3-8b-nvfp4", "--json"], ["inspect", "demo:qwen3-8b-nvfp4"]):
        done = subprocess.run([sys.executable, "-c", LEAN, *args], env=env, capture_output=True, text=True,
                              check=True)
        runs[len(args)] = done
    lean = runs[3].stderr.strip().splitlines()[-1]
    assert lean == "[] 0", runs[3].stderr
    assert json.loads(runs[3].stdout)["kind"] == "inspect"
    # the human answer still draws its document (and so imports advisor.doc)
    assert "advisor.doc" in runs[2].stderr.strip().splitlines()[-1] and "Checkpoint:" in runs[2].stdout
