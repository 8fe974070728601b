"""The supervisor against engines that fight it (issue 21 points 5-7), with both ways of tracking
a server's processes: its own cgroup v2 where the machine allows one, and the process scan.

Counted after every scenario and required to be zero: processes left running (orphans), cgroups
and pidfile records left behind, lines lost around a flood, and memory taken by a 100 MB line.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import textwrap
import time

import psutil
import pytest

from reliability_support import ROOT, fake_command, free_port, tagged
from launchers import pidfile, process_tree
from launchers.supervisor import Server, ServerFailed

pytestmark = pytest.mark.timeout(120)


def start(mode: str, tmp_path, cgroups: bool, **kw):
    cmd, tag = fake_command(mode, **kw)
    srv = Server(cmd, log_path=tmp_path / f"{mode}.log", records_dir=tmp_path / "records", cgroups=cgroups)
    return srv.start(), tag


def pid_in_log(srv: Server, what: str) -> int:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        for line in srv.tail(200):
            m = re.search(rf"{what} pid (\d+)", line)
            if m:
                return int(m.group(1))
        time.sleep(0.05)
    raise AssertionError(f"no '{what} pid' line in {srv.tail(20)}")


def ignoring_signals(pid: int, tag: str) -> None:
    """Wait until the daemon runs its own program with SIGINT and SIGTERM ignored (before that, a
    SIGINT ends it and the stop never needs its SIGKILL)."""
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            status = open(f"/proc/{pid}/status").read()
            cmdline = open(f"/proc/{pid}/cmdline").read()
        except OSError:
            break
        ignored = int(next(ln for ln in status.splitlines() if ln.startswith("SigIgn:")).split()[1], 16)
        if tag in cmdline and ignored & (1 << (signal.SIGINT - 1)) and ignored & (1 << (signal.SIGTERM - 1)):
            return
        time.sleep(0.02)
    raise AssertionError(f"daemon {pid} never ignored SIGINT/SIGTERM")


def nothing_left(srv: Server, tag: str, tmp_path) -> None:
    assert tagged(tag) == [], "orphans"
    assert pidfile.records(tmp_path / "records") == [], "records"
    assert not srv.tree.cgroup or not os.path.exists(srv.tree.cgroup), "cgroup"


def test_a_daemonized_worker_is_ended_by_stop_and_reported(tmp_path, tracking, cleanup):
    srv, tag = start("daemon", tmp_path, tracking)
    cleanup.append(tag)
    srv.wait_ready(30, poll_s=0.1)
    daemon = pid_in_log(srv, "daemon")
    ignoring_signals(daemon, tag)
    assert os.getsid(daemon) != srv.pid and os.getpgid(daemon) != srv.pid   # killpg cannot reach it
    assert daemon in {p.pid for p in srv.processes()}         # ... but it is part of the server
    res = srv.stop(int_timeout_s=0.5, term_timeout_s=0.5, kill_timeout_s=5)
    assert res.signal == "SIGKILL" and res.survivors == ()    # it ignores SIGINT and SIGTERM
    assert any(e.startswith(f"pid {daemon} (") for e in res.escaped), res.escaped
    assert not psutil.pid_exists(daemon) or psutil.Process(daemon).status() == psutil.STATUS_ZOMBIE
    nothing_left(srv, tag, tmp_path)


def test_a_daemon_with_an_empty_environment_is_found_by_its_cgroup(tmp_path, cleanup):
    if not process_tree.cgroup_parent():
        pytest.skip("no writable cgroup v2 here (documented: the scan cannot find such a daemon)")
    srv, tag = start("daemon_bare", tmp_path, True)
    cleanup.append(tag)
    srv.wait_ready(30, poll_s=0.1)
    daemon = pid_in_log(srv, "daemon")
    assert process_tree.MARKER not in psutil.Process(daemon).environ()
    res = srv.stop(int_timeout_s=0.3, term_timeout_s=0.3, kill_timeout_s=5)
    assert res.survivors == () and any(f"pid {daemon} (" in e for e in res.escaped)
    nothing_left(srv, tag, tmp_path)


ADVISOR = textwrap.dedent("""
    import sys, time
    sys.path.insert(0, {root!r})
    sys.path.insert(0, {here!r})
    from pathlib import Path
    from reliability_support import fake_command
    from launchers.supervisor import Server
    cmd, tag = fake_command({mode!r}, tag={tag!r})
    srv = Server(cmd, log_path=Path({tmp!r}) / "advisor.log", records_dir=Path({tmp!r}) / "records",
                 cgroups={cgroups!r}).start()
    srv.wait_ready(30, poll_s=0.1)
    print(srv.pid, flush=True)
    time.sleep(600)
""")


@pytest.mark.parametrize("mode", ["workers", "daemon"])
def test_kill_9_of_the_advisor_leaves_orphans_the_next_start_ends(tmp_path, tracking, mode, cleanup):
    tag = f"nvfp4-test-k9-{os.urandom(4).hex()}"
    cleanup.append(tag)
    code = ADVISOR.format(root=str(ROOT), here=str(ROOT / "tests" / "reliability"), mode=mode, tag=tag,
                          tmp=str(tmp_path), cgroups=tracking)
    advisor = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stdin=subprocess.DEVNULL,
                               text=True)
    leader = int(advisor.stdout.readline())
    advisor.send_signal(signal.SIGKILL)                       # no atexit, no cleanup
    advisor.wait()
    deadline = time.monotonic() + 10
    while psutil.pid_exists(leader) and time.monotonic() < deadline:
        time.sleep(0.05)
    orphans = tagged(tag)
    assert orphans and leader not in orphans                  # the leader died (PDEATHSIG), its children did not
    srv, new_tag = start("never_ready", tmp_path, tracking)    # the next start, in another advisor
    cleanup.append(new_tag)
    try:
        (swept,) = srv.swept
        assert swept.pid == leader and swept.survivors == ()
        assert {int(re.match(r"pid (\d+)", e).group(1)) for e in swept.ended} == set(orphans)
        assert swept.text.startswith(f"ended {len(orphans)} process") and f"(pid {leader}," in swept.text
        assert tagged(tag) == []
    finally:
        srv.stop(int_timeout_s=0.3, term_timeout_s=0.3, kill_timeout_s=5)
    nothing_left(srv, new_tag, tmp_path)


def test_a_server_of_a_live_advisor_is_not_swept(tmp_path, cleanup):
    first, tag = start("workers", tmp_path, False)
    cleanup.append(tag)
    first.wait_ready(30, poll_s=0.1)
    first.proc.kill()                                         # leader gone, but its advisor (us) is alive
    first.proc.wait()
    second, tag2 = start("never_ready", tmp_path, False)
    cleanup.append(tag2)
    try:
        assert second.swept == [] and tagged(tag)             # not ours to end: its advisor still runs
    finally:
        second.stop(int_timeout_s=0.3, term_timeout_s=0.3, kill_timeout_s=5)
        first.stop(int_timeout_s=0.3, term_timeout_s=0.3, kill_timeout_s=5)
    assert tagged(tag) == [] and tagged(tag2) == []


@pytest.mark.parametrize("mode", ["exit_now", "never_ready", "flood", "workers"])
def test_every_fake_engine_ends_with_nothing_left(tmp_path, tracking, mode, cleanup):
    srv, tag = start(mode, tmp_path, tracking)
    cleanup.append(tag)
    try:
        if mode == "exit_now":
            with pytest.raises(ServerFailed, match="exited with status 7"):
                srv.wait_ready(30, poll_s=0.1)
        elif mode == "never_ready":
            with pytest.raises(ServerFailed, match="not ready after"):
                srv.wait_ready(1.5, poll_s=0.1)
        else:
            srv.wait_ready(30, poll_s=0.1)
            if mode == "flood":
                time.sleep(1.0)
                assert len(srv.lines) <= srv.lines.maxlen
    finally:
        res = srv.stop(int_timeout_s=0.5, term_timeout_s=0.5, kill_timeout_s=5)
    assert res.survivors == ()
    nothing_left(srv, tag, tmp_path)


PEAK = textwrap.dedent("""
    import resource, sys
    sys.path.insert(0, {root!r})
    sys.path.insert(0, {here!r})
    from pathlib import Path
    from reliability_support import fake_command
    from launchers.supervisor import Server
    cmd, tag = fake_command(sys.argv[1])
    srv = Server(cmd, log_path=Path(sys.argv[2]), records_dir=Path(sys.argv[2]).parent / "records").start()
    srv.wait_ready(60, poll_s=0.1)
    srv.stop(int_timeout_s=1, term_timeout_s=1, kill_timeout_s=5)
    print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024)
""")


def _peak_mb(mode: str, log) -> int:
    code = PEAK.format(root=str(ROOT), here=str(ROOT / "tests" / "reliability"))
    out = subprocess.run([sys.executable, "-c", code, mode, str(log)], capture_output=True, text=True, timeout=100)
    assert out.returncode == 0, out.stderr
    return int(out.stdout.strip().splitlines()[-1])


def test_a_100_mb_output_line_is_cut_and_costs_no_memory(tmp_path):
    base = _peak_mb("workers", tmp_path / "base.log")
    peak = _peak_mb("long_line", tmp_path / "long.log")
    assert peak < base + 30, (base, peak)                    # was ~450 MB
    text = (tmp_path / "long.log").read_text()
    cut = next(line for line in text.splitlines() if line.startswith("LLLL"))
    assert len(cut) < 9000 and cut.endswith(f"[... {100 * 2**20 - 8192:,} more bytes of this line dropped]")
    assert "after the long line" in text                      # the lines after it are all there


SHIM = """#!/bin/sh
port=8000; prev=""
for a in "$@"; do [ "$prev" = "--port" ] && port=$a; prev=$a; done
exec {python} {fake} "$FAKE_MODE" "$port" "$FAKE_TAG"
"""


def test_launch_reports_the_orphans_it_ended(tmp_path, monkeypatch, capsys, cleanup):
    """`launch` after a kill -9 of an earlier `launch`: the new run ends the orphans and says which."""
    from advisor.cli import main
    from launchers.supervisor import sweep

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = ROOT / "tests/reliability/reliability_fake_engine.py"
    (bin_dir / "vllm").write_text(SHIM.format(python=sys.executable, fake=fake))
    (bin_dir / "vllm").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    old_tag, new_tag = f"nvfp4-test-old-{os.urandom(4).hex()}", f"nvfp4-test-new-{os.urandom(4).hex()}"
    cleanup += [old_tag, new_tag]
    argv = [sys.executable, "-m", "advisor", "launch", "org/model", "--engine", "vllm", "--engine-version", "0.33.0",
            "--port", str(free_port()), "--ready-timeout", "30"]
    first = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
                             env=dict(os.environ, FAKE_MODE="workers", FAKE_TAG=old_tag))
    for line in first.stderr:
        if line.startswith("serving "):
            break
    first.send_signal(signal.SIGKILL)
    first.wait()
    deadline = time.monotonic() + 10
    while len(tagged(old_tag)) > 2 and time.monotonic() < deadline:   # the leader goes with its advisor
        time.sleep(0.05)
    workers = tagged(old_tag)
    assert len(workers) == 2
    monkeypatch.setenv("FAKE_MODE", "ready")
    monkeypatch.setenv("FAKE_TAG", new_tag)
    rc = main(argv[3:] + ["--check", "--port", str(free_port())])
    err = capsys.readouterr().err
    assert rc == 0
    (said,) = [ln for ln in err.splitlines() if ln.startswith("ended 2 processes that an earlier run's vllm server")]
    assert all(f"pid {w} (" in said for w in workers)
    assert tagged(old_tag) == [] and tagged(new_tag) == [] and sweep() == []


@pytest.mark.parametrize("where", ["another host", "an earlier boot"])
def test_a_record_from_elsewhere_never_ends_a_process_here(tmp_path, where, cleanup):
    """A shared home folder holds another host's records, and pids are reused after a reboot: a
    record that matches a live process here by pid, group and start time must still not end it."""
    tag = f"nvfp4-test-stranger-{os.urandom(4).hex()}"
    cleanup.append(tag)
    stranger = subprocess.Popen([sys.executable, "-c", f"import time; time.sleep(600)  # {tag}"],
                                start_new_session=True)
    host, boot = pidfile.this_boot()
    rec = pidfile.ServerRecord(pid=stranger.pid, pgid=stranger.pid, port=free_port(), engine="vllm",
                               started=psutil.Process(stranger.pid).create_time(), command_line="vllm serve x",
                               log="x.log", token="t", host="elsewhere" if where == "another host" else host,
                               boot=boot if where == "another host" else "an-earlier-boot")
    path = pidfile.write(rec, tmp_path / "records")
    from launchers.supervisor import sweep

    try:
        assert sweep(tmp_path / "records") == [] and pidfile.leftovers(tmp_path / "records") == []
        assert stranger.poll() is None                                # untouched
        assert path.exists() == (where == "another host")            # that host's own; a past boot's is stale
    finally:
        stranger.kill()
        stranger.wait()
