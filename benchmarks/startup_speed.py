"""Cold start of every entry point a user waits for (issue 23, point 2), against the interpreter floor.

Each sample is a fresh process: `python -c pass` (the floor: interpreter, site, the editable-install
hook), `--help`, `probe --json`, `plan demo:… --json`, and the TUI up to its first paint (Textual's
Ready event, headless, 80x24). The cases take turns (run 1 of each, then run 2 of each, …) so a load
spike on a shared machine hits them alike. One run of each comes first and is not counted: it writes
the bytecode (unless PYTHONDONTWRITEBYTECODE) and fills the advisor's profile caches in a temporary
cache dir, the state a user is in from their second command on; its time is shown as "first".
Besides the medians it prints each case's ratio to the floor, the CPU seconds the process used (user +
system from the kernel's accounting; the TUI: its own process time at the first paint) with their ratio
to the floor's, and, from one `-X importtime` run, how many modules it imports and their summed import
time: the figures that stay meaningful on a loaded machine, where wall times are not.

    python benchmarks/startup_speed.py [--runs 7] [--smoke]

Exit 1 when a median is over its target (targets are for a quiet machine). --smoke: one counted run,
no targets (CI runs it so the script cannot rot).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEMO = "demo:qwen3-8b-nvfp4"

TUI_CHILD = r"""
import sys, time
from pathlib import Path
from advisor.tui import create_app
from advisor.tui.app import AdvisorApp
def on_ready(self):            # Textual sends Ready once the first screen is composed and painted
    sys.stdout.write(f"painted {time.process_time()}\n"); sys.stdout.flush()
    self.exit()
AdvisorApp.on_ready = on_ready
create_app(state_file=Path(sys.argv[1]) / "state.yaml").run(headless=True, size=(80, 24))
"""

# label, argv after the interpreter, target seconds (None: the floor)
CASES = (
    ("python -c pass", ["-c", "pass"], None),
    ("--help", ["-m", "advisor", "--help"], 0.10),
    ("probe --json", ["-m", "advisor", "probe", "--json"], 0.15),
    ("plan --json", ["-m", "advisor", "plan", DEMO, "--gpu", "rtx-3090", "--engine", "vllm", "--json"], 0.20),
    ("TUI first paint", ["-c", TUI_CHILD], 0.50),
)


def _env(cache: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(XDG_CACHE_HOME=cache, XDG_CONFIG_HOME=cache, XDG_DATA_HOME=cache, NO_COLOR="1")
    env.pop("NVFP4_ADVISOR_NO_CACHE", None)
    return env


def run_once(argv: list[str], env: dict[str, str], tmp: str) -> tuple[float, float]:
    """Seconds until the process exits (the TUI: until it says it has painted), and the CPU seconds
    it used by then (user + system as the kernel counts them; the TUI reports its own)."""
    tui = argv[:2] == ["-c", TUI_CHILD]
    cmd = [sys.executable, *argv] + ([tmp] if tui else [])
    with tempfile.TemporaryFile() as errfile:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE if tui else subprocess.DEVNULL, stderr=errfile)
        if tui:
            line = proc.stdout.readline()
            elapsed = time.perf_counter() - t0
            proc.communicate(timeout=60)
            word, _, cpu_text = line.strip().partition(b" ")
            ok, cpu = word == b"painted", float(cpu_text or "nan")
        else:
            _, status, usage = os.wait4(proc.pid, 0)        # reaps it: its own CPU accounting
            elapsed = time.perf_counter() - t0
            proc.returncode = os.waitstatus_to_exitcode(status)
            ok, cpu = proc.returncode == 0, usage.ru_utime + usage.ru_stime
        if not ok:
            errfile.seek(0)
            err = errfile.read().decode("utf-8", "replace")
            raise SystemExit(f"{' '.join(argv)[:60]} failed (exit {proc.returncode}): {err.strip()[-400:]}")
    return elapsed, cpu


def import_profile(argv: list[str], env: dict[str, str], tmp: str) -> tuple[int, float]:
    """(modules imported, their summed self import time in s) from one `python -X importtime` run."""
    tui = argv[:2] == ["-c", TUI_CHILD]
    cmd = [sys.executable, "-X", "importtime", *argv] + ([tmp] if tui else [])
    proc = subprocess.run(cmd, cwd=ROOT, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=120)
    count, total_us = 0, 0
    for line in proc.stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        count += 1
        total_us += int(line.split(":", 1)[1].split("|")[0])
    return count, total_us / 1e6


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=7, help="counted runs per case (>= 5 for the figures; default 7)")
    ap.add_argument("--smoke", action="store_true", help="one counted run, no targets")
    args = ap.parse_args(argv)
    # bytecode present, as the set-up leaves it (.ci/dev runs compileall): under PYTHONDONTWRITEBYTECODE the
    # uncounted first run writes none, and each counted run would compile every module edited since set-up
    subprocess.run([sys.executable, "-m", "compileall", "-q", "-j", "0", "advisor", "launchers", "profiles",
                    "kernels"], cwd=ROOT, stdout=subprocess.DEVNULL, check=False)
    runs = 1 if args.smoke else max(args.runs, 1)
    samples: dict[str, list[float]] = {label: [] for label, _, _ in CASES}
    cpus: dict[str, list[float]] = {label: [] for label, _, _ in CASES}
    with tempfile.TemporaryDirectory(prefix="startup-speed-") as tmp:
        env = _env(tmp)
        first = {label: run_once(cmd, env, tmp)[0] for label, cmd, _ in CASES}    # bytecode, caches
        for _ in range(runs):
            for label, cmd, _ in CASES:
                wall, cpu = run_once(cmd, env, tmp)
                samples[label].append(wall)
                cpus[label].append(cpu)
        imports = {label: import_profile(cmd, env, tmp) for label, cmd, _ in CASES}
    floor = statistics.median(samples[CASES[0][0]])
    cpu_floor = statistics.median(cpus[CASES[0][0]])
    bytecode = "off (PYTHONDONTWRITEBYTECODE)" if os.environ.get("PYTHONDONTWRITEBYTECODE") else "on"
    print(f"startup_speed: {runs} counted run(s) per case after one uncounted; python {sys.version.split()[0]}, "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}, bytecode writing {bytecode}")
    print(f"{'case':<17}{'median s':>9}{'min s':>8}{'first s':>9}{'x floor':>9}{'cpu s':>7}{'cpu x':>7}"
          f"{'modules':>9}{'import s':>10}{'target s':>10}  verdict")
    failed = False
    for label, _, target in CASES:
        med = statistics.median(samples[label])
        count, imp = imports[label]
        if target is None:
            verdict, shown = "floor", "-"
        else:
            over = med > target
            failed = failed or over
            verdict, shown = ("over" if over else "ok"), f"{target:.2f}"
        cpu = statistics.median(cpus[label])
        print(f"{label:<17}{med:>9.3f}{min(samples[label]):>8.3f}{first[label]:>9.3f}{med / floor:>9.2f}"
              f"{cpu:>7.3f}{cpu / cpu_floor:>7.2f}{count:>9}{imp:>10.3f}{shown:>10}  {verdict}")
    if args.smoke:
        return 0
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
