"""The README's examples work as written after the set-up: `.ci/dev`'s PATH step links
~/.local/bin/nvfp4-advisor to this clone's .venv, then every `nvfp4-advisor …` line of the README's
```bash blocks runs in a plain shell (PATH without .venv/bin) and exits 0. ```console / ```text blocks
hold output or commands that need a server; they are not run. `./my-model` is the user's own
checkpoint folder; here a demo's configs stand in for it."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
VENV_BIN = ROOT / ".venv" / "bin"

pytestmark = [pytest.mark.timeout(600),
              pytest.mark.skipif(Path(sys.executable).parent.resolve() != VENV_BIN.resolve() and
                                 not (VENV_BIN / "nvfp4-advisor").exists(),
                                 reason="needs the set-up's .venv (bash .ci/dev run|test)")]


def readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    lines = []
    for block in re.findall(r"^```bash\n(.*?)^```", text, re.S | re.M):
        lines += [ln.strip() for ln in block.splitlines() if ln.strip().startswith("nvfp4-advisor ")]
    return lines


@pytest.fixture(scope="module")
def shell(tmp_path_factory):
    """A user's shell after `bash .ci/dev run`: HOME with ~/.local/bin on PATH, .venv/bin not on it."""
    base = tmp_path_factory.mktemp("readme")
    home, work = base / "home", base / "work"
    (home / ".local" / "bin").mkdir(parents=True)
    work.mkdir()
    from advisor.checkpoint.demo import demo_path

    shutil.copytree(demo_path("qwen3-8b-nvfp4"), work / "my-model")
    env = {"HOME": str(home), "PATH": f"{home}/.local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "COLUMNS": "100",
           "HF_HUB_OFFLINE": "1", "XDG_CONFIG_HOME": str(base / "cfg"), "XDG_DATA_HOME": str(base / "data"),
           "XDG_CACHE_HOME": str(base / "cache")}
    done = subprocess.run(["bash", str(ROOT / ".ci" / "dev"), "path"], env=env, capture_output=True, text=True,
                          timeout=60, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr
    link = home / ".local" / "bin" / "nvfp4-advisor"
    assert link.is_symlink() and link.resolve() == (VENV_BIN / "nvfp4-advisor").resolve(), done.stderr
    return env, work


def test_the_readme_has_examples_to_run():
    cmds = readme_commands()
    assert len(cmds) >= 8, cmds
    assert any(" launch " in c and "--dry-run" in c for c in cmds)


@pytest.mark.parametrize("line", readme_commands())
def test_readme_example_runs_as_written(shell, line):
    env, work = shell
    res = subprocess.run(["bash", "-c", line], cwd=work, env=env, capture_output=True, text=True, timeout=300,
                         stdin=subprocess.DEVNULL)
    assert res.returncode == 0, f"{line}\n{res.stdout[-1500:]}\n{res.stderr[-1500:]}"
    assert "Traceback" not in res.stderr and "command not found" not in res.stderr
    assert res.stdout.strip() or res.stderr.strip()


def test_path_step_says_how_when_local_bin_is_not_on_path(tmp_path):
    env = {"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
    res = subprocess.run(["bash", str(ROOT / ".ci" / "dev"), "path"], env=env, capture_output=True, text=True,
                         timeout=60, stdin=subprocess.DEVNULL)
    assert res.returncode == 0
    assert f'export PATH="{ROOT}/.venv/bin:$PATH"' in res.stderr and "source .venv/bin/activate" in res.stderr
    assert not (tmp_path / ".local" / "bin" / "nvfp4-advisor").exists()


def test_path_step_leaves_another_program_alone(tmp_path):
    bin_dir = tmp_path / ".local" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "nvfp4-advisor").write_text("#!/bin/sh\necho mine\n")
    env = {"HOME": str(tmp_path), "PATH": f"{bin_dir}:/usr/bin:/bin"}
    res = subprocess.run(["bash", str(ROOT / ".ci" / "dev"), "path"], env=env, capture_output=True, text=True,
                         timeout=60, stdin=subprocess.DEVNULL)
    assert res.returncode == 0 and "not ours" in res.stderr
    assert (bin_dir / "nvfp4-advisor").read_text() == "#!/bin/sh\necho mine\n"


def test_setup_hides_pip_noise_and_prints_one_line_per_phase(tmp_path):
    """The phase helper of .ci/dev, run on a command that chatters like pip's editable install."""
    script = (ROOT / ".ci" / "dev").read_text()
    helper = script[script.index("phase() {"):script.index("\nmk_main()")]
    noisy = ("echo 'Collecting textual>=0.80'; echo 'Installing collected packages: textual'; "
             "echo '!!' >&2; "
             "echo '        ********************************************************************************' >&2; "
             "echo '        Editable installation: setuptools ...' >&2")
    prog = f"set -euo pipefail\nLOG={tmp_path}/log\n{helper}\nphase 'installing things' sh -c \"{noisy}\"\n" \
           "phase 'second step' true\n"
    res = subprocess.run(["bash", "-c", prog], capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert res.returncode == 0, res.stderr
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 2 and lines[0].startswith("  installing things … done (") and "second step" in lines[1]
    assert "Editable installation" not in res.stderr + res.stdout
    failing = prog.replace("phase 'second step' true", "phase 'third step' sh -c 'echo why it failed >&2; exit 3'")
    res = subprocess.run(["bash", "-c", failing], capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert res.returncode == 3 and "third step … failed" in res.stderr and "why it failed" in res.stderr


def test_ctrl_c_during_a_phase_ends_its_command(tmp_path):
    """On a terminal the phase runs pip in the background (to redraw its line), and a script's
    background job ignores Ctrl-C: the phase must end it, or pip goes on installing unseen."""
    import os
    import pty
    import signal
    import time

    script = (ROOT / ".ci" / "dev").read_text()
    helper = script[script.index("phase() {"):script.index("\nmk_main()")]
    pidfile = tmp_path / "child.pid"
    prog = (f"set -euo pipefail\nLOG={tmp_path}/log\n{helper}\n"
            f"phase 'long step' sh -c 'echo $$ > {pidfile}; exec sleep 120'\necho after >&2\n")
    master, slave = pty.openpty()
    # a user's shell at a terminal takes Ctrl-C; pytest itself may run with SIGINT ignored (started with `&`
    # from a script), and bash cannot trap a signal ignored when it starts
    proc = subprocess.Popen(["bash", "-c", prog], stderr=slave, stdout=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
                            start_new_session=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    os.close(slave)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not (pidfile.exists() and pidfile.read_text().strip()):
            time.sleep(0.1)
        child = int(pidfile.read_text())
        time.sleep(1.5)                             # inside the redraw loop
        os.killpg(proc.pid, signal.SIGINT)          # Ctrl-C: the terminal signals the foreground group
        assert proc.wait(30) == 130
        drawn = b""
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:
                break
            if not chunk:
                break
            drawn += chunk
    finally:
        os.close(master)
    time.sleep(0.5)
    gone = not Path(f"/proc/{child}").exists() or Path(f"/proc/{child}/stat").read_text().split()[2] == "Z"
    if not gone:
        os.kill(child, signal.SIGKILL)
    assert gone, "the phase's command outlived Ctrl-C"
    text = drawn.decode("utf-8", "replace")
    assert "long step … interrupted after" in text and "\nafter" not in text      # the script stopped there
