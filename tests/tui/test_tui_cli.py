"""How the CLI opens (or, without a terminal, stands in for) the TUI."""

from __future__ import annotations

import subprocess
import sys


def run(*args: str):
    return subprocess.run([sys.executable, "-m", "advisor", *args], capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=120)


def test_no_terminal_prints_a_demo_answer_instead_of_the_tui():
    p = run()
    assert p.returncode == 0, p.stderr
    assert "Planning set" in p.stdout or "GPU" in p.stdout
    assert "demo:" in p.stdout and "tok/s" in p.stdout
    assert "Not a terminal" in p.stdout
    assert "Traceback" not in p.stderr


def test_tui_command_rejects_bad_choices_before_opening():
    p = run("tui", "--gpu", "no-such-gpu")
    assert p.returncode == 2
    assert p.stderr.count("\n") == 1 and "no-such-gpu" in p.stderr
    p = run("tui", "--json")
    assert p.returncode == 2 and "--json" in p.stderr


def test_make_app_applies_explicit_choices(make_app):
    app = make_app(checkpoint="demo:qwen3-30b-a3b-fp8", gpu="h100-sxm", gpus=2, engine="sglang")
    st = app.state
    assert (st.checkpoint, st.gpu_id, st.gpus, st.engine) == ("demo:qwen3-30b-a3b-fp8", "h100-sxm", 2, "sglang")
    assert "demo:qwen3-30b-a3b-fp8" not in st.recent      # only after it has inspected


async def test_a_bad_path_from_the_command_line_is_not_remembered(make_app, tmp_path):
    bad = str(tmp_path / "nope")
    app = make_app(checkpoint=bad)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert "inspect" in app.analysis.errors
    assert bad not in app.state.recent
