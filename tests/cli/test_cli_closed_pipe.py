"""`nvfp4-advisor … | head`: a reader that closes the pipe early is not a failure (exit 0, no message),
for Rich output, --json output and the piped default answer; a real failure keeps its status."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.timeout(120)


def _run_with_closed_stdout(*args: str) -> subprocess.CompletedProcess:
    """Start the CLI with stdout a pipe whose reading end is already closed: every write gets EPIPE."""
    env = dict(os.environ, HF_HUB_OFFLINE="1", COLUMNS="80")
    proc = subprocess.Popen([sys.executable, "-m", "advisor", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, env=env)
    proc.stdout.close()
    err = proc.stderr.read().decode()
    proc.stderr.close()
    return subprocess.CompletedProcess(proc.args, proc.wait(timeout=100), "", err)


@pytest.mark.parametrize("args", [("gpus",), ("gpus", "--json"),
                                  ("explain", "demo:qwen3-8b-nvfp4", "--gpu", "rtx-3090"), ()],
                         ids=["rich", "json", "explain", "piped-default"])
def test_closed_pipe_is_not_a_failure(args):
    res = _run_with_closed_stdout(*args)
    assert res.returncode == 0, res.stderr
    assert res.stderr == ""


def test_a_real_failure_keeps_its_status_when_the_pipe_is_closed():
    res = _run_with_closed_stdout("explain", "demo:no-such-demo", "--gpu", "rtx-3090")
    assert res.returncode == 3 and "no-such-demo" in res.stderr
