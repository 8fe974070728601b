"""The Launch tab's command editing: what the user types is what runs (argv, env, port)."""

from __future__ import annotations

import pytest

from advisor.errors import UsageError
from advisor.services.analysis import Selection, analyze
from advisor.tui.actions import command_from_line, launch_command_line, start_server


@pytest.fixture(scope="module")
def analysis():
    return analyze(Selection("demo:qwen3-8b-nvfp4", "rtx-3090"))


def test_generated_line_round_trips(analysis):
    line = launch_command_line(analysis)
    cmd = command_from_line(line, analysis)
    assert cmd.argv[:2] == ("vllm", "serve")
    # The plan's recommendation is what the line carries.
    rec = analysis.plan.recommendation
    for flag, value in rec.flags.items():
        assert cmd.argv[cmd.argv.index(flag) + 1] == value


def test_edits_env_port_and_continuations(analysis):
    line = "CUDA_VISIBLE_DEVICES=1 FOO='a b' vllm serve /m \\\n  --port 9123 \\\n  --host 127.0.0.1  # comment"
    cmd = command_from_line(line, analysis)
    assert cmd.env == (("CUDA_VISIBLE_DEVICES", "1"), ("FOO", "a b"))
    assert cmd.argv == ("vllm", "serve", "/m", "--port", "9123", "--host", "127.0.0.1")
    assert cmd.settings.port == 9123 and cmd.settings.base_url == "http://127.0.0.1:9123"


@pytest.mark.parametrize("line", ["", "A=1", "vllm serve 'unterminated", "vllm serve m --port"])
def test_bad_lines_are_usage_errors(analysis, line):
    with pytest.raises(UsageError):
        command_from_line(line, analysis)


def test_demo_checkpoints_cannot_be_launched(analysis):
    with pytest.raises(UsageError, match="demo"):
        start_server(launch_command_line(analysis), analysis)
