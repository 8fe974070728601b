"""`nvfp4-advisor <cmd> --json | head -c 10` for every command: a reader that leaves early is met
quietly (the command's own exit status, nothing on stderr but its own error line), with stdout block
buffered as a user's Python has it (no PYTHONUNBUFFERED): the small outputs only fail at the flush
on exit, which Python reports as "Exception ignored … BrokenPipeError" with status 120."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from advisor.command_table import COMMANDS

pytestmark = pytest.mark.timeout(300)

DEMO = "demo:qwen3-8b-nvfp4"

# command -> (arguments after the command, exit statuses it may end with): an answer where one comes
# without a GPU or a server, else the command's error document (also written to stdout with --json).
CASES = {
    "tui": ([], {2}),                                         # the TUI has no --json: a usage error
    "probe": ([], {0}),
    "gpus": ([], {0}),
    "inspect": ([DEMO], {0}),
    "explain": ([DEMO, "--gpu", "rtx-3090"], {0}),
    "plan": ([DEMO, "--gpu", "rtx-3090"], {0}),
    "launch": ([DEMO, "--engine", "vllm", "--gpu", "rtx-3090", "--dry-run"], {0}),
    "bench": (["--url", "http://127.0.0.1:9", "--timeout", "5"], {1}),   # nothing listens on port 9
    "microbench": (["--device", "99", "--no-save", "--budget", "5"], {0, 1, 3}),  # no such card, GPU or not
    "report": ([DEMO, "--gpu", "rtx-3090", "-o", "{tmp}/r.md"], {0}),
    "convert": (["{tmp}/missing", "{tmp}/out"], {3}),
    "verify": (["{tmp}/missing", "--reference", "{tmp}/missing"], {3}),
    "quality": (["{tmp}/missing", "{tmp}/missing"], {3}),
}


def _closed_stdout(args: list[str], tmp) -> subprocess.CompletedProcess:
    """Run the CLI with stdout a pipe whose reading end is already closed."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    env.update(HF_HUB_OFFLINE="1", COLUMNS="80", XDG_DATA_HOME=str(tmp / "data"), XDG_CACHE_HOME=str(tmp / "cache"))
    proc = subprocess.Popen([sys.executable, "-m", "advisor", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, env=env)
    proc.stdout.close()
    err = proc.stderr.read().decode()
    proc.stderr.close()
    return subprocess.CompletedProcess(proc.args, proc.wait(timeout=200), "", err)


def test_every_command_has_a_case():
    assert set(CASES) == set(COMMANDS)


@pytest.mark.parametrize("command", list(CASES))
def test_json_into_a_closed_pipe(command, tmp_path):
    rest, codes = CASES[command]
    res = _closed_stdout([command, *(a.format(tmp=tmp_path) for a in rest), "--json"], tmp_path)
    assert res.returncode in codes, res.stderr
    assert "Traceback" not in res.stderr and "BrokenPipe" not in res.stderr and "Exception ignored" not in res.stderr
    assert res.stderr.count("\n") <= 1, res.stderr    # at most the command's own error line


@pytest.mark.parametrize("args", [["--help"], ["--version"], ["plan", "--help"], ["gpus"], ["plan", "--no-such-flag"]],
                         ids=["help", "version", "command-help", "rich", "usage-error"])
def test_other_output_into_a_closed_pipe(args, tmp_path):
    res = _closed_stdout(args, tmp_path)
    assert res.returncode == (2 if "--no-such-flag" in args else 0), res.stderr
    assert "Traceback" not in res.stderr and "Exception ignored" not in res.stderr
