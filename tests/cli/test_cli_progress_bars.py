"""`convert` and `microbench` draw their progress with the shared bar (advisor.progress steps, drawn by
advisor/cli.py RichBar with rich.progress), as `bench` does: done / total with the unit and an ETA on a
terminal; nothing in a redirected log or with --json. They used to draw hand-made `\\r` bars."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from argparse import Namespace
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(300)
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def bf16_checkpoint(tmp_path):
    import torch

    from tests.convert.conftest import write_checkpoint

    g = torch.Generator().manual_seed(0)
    tensors = {f"model.layers.{i}.mlp.{p}.weight": (torch.randn(512, 512, generator=g) * 0.02).to(torch.bfloat16)
               for i in range(4) for p in ("gate_proj", "up_proj", "down_proj")}
    return write_checkpoint(tmp_path / "src", tensors, {"model_type": "llama"})


def _on_a_terminal(argv: list[str]) -> tuple[int, str]:
    """Run the CLI with stderr on a pseudo-terminal; (exit code, all it drew there)."""
    import pty
    import select

    master, slave = pty.openpty()
    env = dict(os.environ, COLUMNS="120", TERM="xterm", PYTHONPATH=str(ROOT))
    proc = subprocess.Popen([sys.executable, "-m", "advisor", *argv], stdout=subprocess.PIPE, stderr=slave,
                            stdin=subprocess.DEVNULL, env=env, cwd=ROOT)
    os.close(slave)
    seen = b""
    while select.select([master], [], [], 120)[0]:
        try:
            chunk = os.read(master, 65536)
        except OSError:
            break
        if not chunk:
            break
        seen += chunk
    proc.communicate(timeout=120)
    os.close(master)
    return proc.returncode, seen.decode("utf-8", "replace")


def test_convert_draws_the_shared_bar_on_a_terminal(bf16_checkpoint, tmp_path):
    code, drawn = _on_a_terminal(["convert", str(bf16_checkpoint), str(tmp_path / "out"), "--jobs", "1"])
    assert code == 0, drawn[-2000:]
    assert "convert: writing" in drawn and "ETA" in drawn
    assert re.search(r"\d\.\d\d/0\.01 GB", drawn), drawn[-2000:]        # bytes done of the 6.3 MB total
    assert "[#" not in drawn and "[." not in drawn                       # not the old hand-made bar


def test_convert_keeps_a_redirected_log_and_json_free_of_progress(bf16_checkpoint, tmp_path):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    plain = subprocess.run([sys.executable, "-m", "advisor", "convert", str(bf16_checkpoint), str(tmp_path / "a")],
                           capture_output=True, text=True, env=env, cwd=ROOT, timeout=120, stdin=subprocess.DEVNULL)
    assert plain.returncode == 0 and plain.stderr == "", plain.stderr
    js = subprocess.run([sys.executable, "-m", "advisor", "convert", str(bf16_checkpoint), str(tmp_path / "b"),
                         "--json"], capture_output=True, text=True, env=env, cwd=ROOT, timeout=120,
                        stdin=subprocess.DEVNULL)
    assert js.returncode == 0 and js.stderr == "" and js.stdout.lstrip().startswith("{")


def test_microbench_hands_each_case_to_the_bar_and_closes_it(monkeypatch):
    from advisor.commands import Outcome, microbench
    from advisor.progress import Step

    drawn: list = []

    class Recording:
        def __init__(self, title):
            drawn.append(("open", title))

        def __call__(self, step):
            drawn.append(step)

        def close(self):
            drawn.append("closed")

    def fake_measure(shapes, ms, *, progress, **kw):
        for i, case in enumerate(("bandwidth", "w4a16 nvfp4 M=1")):
            progress(i + 1, 2, case)
        return Outcome(json={}, doc=None, exit_code=0)

    monkeypatch.setattr(microbench, "gpu_unavailable", lambda: None)
    monkeypatch.setattr(microbench, "measure", fake_measure)
    args = Namespace(m=None, shapes_from=None, device=0, budget=60.0, no_save=True, json=False, progress=Recording)
    assert microbench.run(args).exit_code == 0
    assert drawn == [("open", "microbench"), Step(1, 2, "case", "bandwidth"), Step(2, 2, "case", "w4a16 nvfp4 M=1"),
                     "closed"]
