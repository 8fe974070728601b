"""The CLI shell: discovery, --json envelope, one-line errors and exit codes."""

from __future__ import annotations

import json

import pytest

from advisor import cli, commands
from cli_fakes import install_fake_command
from advisor.commands import Outcome
from advisor.doc import Doc, Paragraph
from advisor.errors import BadInput


def test_every_command_module_is_complete_and_listed(capsys):
    names = [m.NAME for m in commands.discover()]
    assert len(names) == len(set(names))
    for needed in ("probe", "gpus", "inspect", "explain", "plan", "launch", "bench", "microbench", "report",
                   "convert", "verify", "tui"):
        assert needed in names
    with pytest.raises(SystemExit) as e:
        cli.main(["--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert all(n in out for n in names)


_fake = install_fake_command


def test_bad_input_is_one_line_with_exit_3(monkeypatch, capsys):
    def run(args):
        raise BadInput("header length 9999999999 exceeds the file", path="/x/model.safetensors")

    _fake(monkeypatch, run)
    assert cli.main(["fake"]) == 3
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "/x/model.safetensors: header length" in err
    assert cli.main(["fake", "--json"]) == 3
    doc = json.loads(capsys.readouterr().out)
    assert doc["schema_version"] and doc["exit_code"] == 3 and "header length" in doc["error"]


def test_unexpected_bug_is_still_one_line(monkeypatch, capsys):
    def run(args):
        raise KeyError("oops")

    _fake(monkeypatch, run)
    monkeypatch.delenv("NVFP4_ADVISOR_DEBUG", raising=False)
    assert cli.main(["fake"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "internal error" in err and "Traceback" not in err
    monkeypatch.setenv("NVFP4_ADVISOR_DEBUG", "1")
    with pytest.raises(KeyError):
        cli.main(["fake"])


def test_outcome_renders_and_keeps_exit_code(monkeypatch, capsys):
    _fake(monkeypatch, lambda args: Outcome(json={"schema_version": "1", "x": 1},
                                            doc=Doc((Paragraph("hello there"),)), exit_code=4))
    assert cli.main(["fake"]) == 4
    assert "hello there" in capsys.readouterr().out
    assert cli.main(["fake", "--json"]) == 4
    assert json.loads(capsys.readouterr().out) == {"schema_version": "1", "x": 1}


def test_usage_errors_exit_2(capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(["no-such-command"])
    assert e.value.code == 2
