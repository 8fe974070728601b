"""Run one engine server: own session and process group, logs to a file and to the caller,
readiness, diagnosis, and a stop that escalates SIGINT -> SIGTERM -> SIGKILL over its whole tree.

The tree is every process the server started, also those that left its process group (double
fork + setsid): its own cgroup where one can be made, an environment marker, and its group and
session (launchers/process_tree.py). ``stop`` signals all of them and reports the ones outside
the group it had to end; survivors are reported, never hidden.

The leader dies with the advisor: the child sets PR_SET_PDEATHSIG before exec. Linux delivers that
signal when the *thread* that forked the child exits, so every server is forked by one spawner
thread that lives as long as the advisor (a TUI worker thread that starts a server and returns
must not take the server with it). The leader's own children get no such signal when the advisor
is killed with SIGKILL: a pidfile per server lets the next start find them, and ``start`` ends what
a dead advisor left behind (``Server.swept``).

Engine output is read in lines of at most MAX_LOG_LINE bytes: the rest of a longer line is dropped
(and counted in the line), so a 100 MB line costs no memory.

One module over ~400 lines on purpose: it is the lifecycle of one server process, and the spawner
thread, the child's set-up, the log reader, readiness and the escalating stop keep one set of
invariants together (who forks, which group and pidfile mark the tree, what dies with the advisor);
the tree walk, pidfiles, readiness probes and log signatures already live in their own modules.
"""

from __future__ import annotations

import atexit
import collections
import ctypes
import errno
import os
import queue
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import psutil

from advisor import engines
from advisor.errors import AdvisorError
from launchers import pidfile, process_tree
from launchers.command import LaunchCommand
from launchers.readiness import ProbeResult, probe
from advisor.redact import redact as redact_text
from launchers.signatures import FATAL, NOT_READY, PORT, READY, Finding, diagnose, match_line

PR_SET_PDEATHSIG = 1
MAX_LOG_LINE = 8192           # bytes of one engine output line kept (vLLM's config line is ~4 KB)
try:  # loaded before any fork: dlopen after fork is not safe
    _LIBC = ctypes.CDLL(None, use_errno=True) if sys.platform.startswith("linux") else None
except OSError:  # pragma: no cover
    _LIBC = None

_LIVE: "weakref.WeakSet[Server]" = weakref.WeakSet()


class ServerFailed(AdvisorError):
    """The server did not come up (or died); carries the findings and the log tail."""

    def __init__(self, message: str, findings=(), tail=(), exit_code: int | None = None):
        super().__init__(message)
        self.findings = tuple(findings)
        self.tail = tuple(tail)
        self.server_exit_code = exit_code


@dataclass(frozen=True)
class Ready:
    elapsed_s: float
    base_url: str
    probe: ProbeResult
    findings: tuple[Finding, ...]         # warnings seen before ready (fallbacks etc.)


@dataclass(frozen=True)
class StopResult:
    signal: str | None                    # the signal that ended the tree; None = it had already exited
    elapsed_s: float
    exit_code: int | None
    survivors: tuple[int, ...] = ()       # pids still alive after SIGKILL (should be empty)
    escaped: tuple[str, ...] = ()         # 'pid N (name)' of processes that had left the process group


@dataclass(frozen=True)
class Swept:
    """What ``start`` ended of a server an earlier, dead advisor left behind."""

    pid: int                              # the server's leader (already gone)
    port: int
    engine: str
    ended: tuple[str, ...]                # 'pid N (name)'
    survivors: tuple[int, ...] = ()

    @property
    def text(self) -> str:
        return (f"ended {len(self.ended)} process{'es' if len(self.ended) != 1 else ''} that an earlier run's "
                f"{self.engine} server (pid {self.pid}, port {self.port}) left behind: {', '.join(self.ended)}"
                + (f"; still alive: {', '.join(map(str, self.survivors))}" if self.survivors else ""))


@dataclass
class Progress:
    elapsed_s: float
    phase: str                            # "starting" | "loading" | "ready"
    last_line: str
    probe: str
    events: list[str] = field(default_factory=list)


def port_free(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError as err:
            if err.errno in (errno.EADDRINUSE, errno.EACCES):
                return False
            raise
    return True


def resolve_executable(name: str) -> str:
    found = shutil.which(name) or shutil.which(name, path=str(Path(sys.executable).parent))
    if not found:
        raise AdvisorError(f"{name}: not found on PATH (is the engine installed in this environment?)")
    return found


class _Spawner:
    """One long-lived thread that forks every server (see the module docstring)."""

    def __init__(self) -> None:
        self._jobs: queue.Queue = queue.Queue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def call(self, fn):
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._loop, name="nvfp4-advisor-spawner", daemon=True)
                self._thread.start()
        done = threading.Event()
        box: dict[str, Any] = {}
        self._jobs.put((fn, box, done))
        done.wait()
        if "error" in box:
            raise box["error"]
        return box["value"]

    def _loop(self) -> None:
        while True:
            fn, box, done = self._jobs.get()
            try:
                box["value"] = fn()
            except BaseException as err:  # noqa: BLE001 - handed back to the caller's thread
                box["error"] = err
            done.set()


_SPAWNER = _Spawner()


def _child_setup(parent_pid: int, cgroup_procs: str) -> None:  # runs in the child between fork and exec
    # An ignored signal stays ignored across exec: an advisor started in the background (`cmd &` in a
    # script, nohup) ignores SIGINT, and the server would too, so the graceful first step of every stop
    # (SIGINT, the engine's Ctrl-C shutdown) would do nothing. The server starts with the default.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    if _LIBC is not None:
        _LIBC.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent_pid:  # the parent died before prctl took effect
        os._exit(1)
    if cgroup_procs:                # join the server's cgroup before anything can fork: bare syscalls only
        try:
            fd = os.open(cgroup_procs, os.O_WRONLY)
            os.write(fd, b"0")
            os.close(fd)
        except OSError:
            pass                    # the parent sees it did not join and tracks without the cgroup


def sweep(records_dir: Path | None = None) -> list[Swept]:
    """End the remains of servers whose advisor and leader are both gone (a kill -9 of the advisor
    leaves the leader's children running) and delete their records. A server whose leader still
    runs is a leftover for ``--stop-leftovers``, not an orphan: it is left alone."""
    out = []
    for rec in pidfile.records(records_dir):
        if pidfile.owner_alive(rec) or pidfile.leader_alive(rec):
            continue
        procs = process_tree.members(rec.tree) if rec.pgid > 1 else []
        if procs:
            res = stop_tree(rec.tree, None, int_timeout_s=0.5, term_timeout_s=1.5, kill_timeout_s=5.0)
            out.append(Swept(rec.pid, rec.port, rec.engine, process_tree.describe(procs), res.survivors))
            if res.survivors:
                continue            # keep the record: the next start tries again
        process_tree.remove_cgroup(rec.cgroup)
        pidfile.remove_record(rec)
    process_tree.remove_stale_cgroups()
    return out


class Server:
    """One supervised server. Use as a context manager or call ``stop()``."""

    def __init__(self, cmd: LaunchCommand, *, log_path: Path | str, on_line: Callable[[str], None] | None = None,
                 records_dir: Path | None = None, work_dir: Path | str | None = None, keep_lines: int = 4000,
                 cgroups: bool = True):
        self.cmd = cmd
        self.engine = cmd.engine
        self.log_path = Path(log_path)
        self.on_line = on_line
        self.records_dir = records_dir
        self.work_dir = Path(work_dir) if work_dir else self.log_path.parent
        self.lines: collections.deque[str] = collections.deque(maxlen=keep_lines)
        self.findings: list[Finding] = []
        self.events: list[str] = []           # FastLLM FTLLM_PROGRESS events etc.
        self.proc: subprocess.Popen | None = None
        self._reader: threading.Thread | None = None
        self._lock = threading.Lock()
        self._ready_line: str | None = None
        self.started_at = 0.0
        self.use_cgroups = cgroups
        self.tree: process_tree.Tree | None = None
        self.swept: list[Swept] = []          # what start() ended of earlier runs' orphans

    # ------------------------------------------------------------------ start
    def start(self) -> "Server":
        s = self.cmd.settings
        self.swept = sweep(self.records_dir)
        if not port_free(s.host, s.port):
            owners = [r for r in pidfile.leftovers(self.records_dir) if r.port == s.port]
            if owners:
                raise ServerFailed(f"port {s.port} is held by a server nvfp4-advisor started earlier "
                                   f"(pid {owners[0].pid}, {owners[0].engine}); stop it with --stop-leftovers",
                                   [Finding(PORT, "a leftover server holds the port", "--stop-leftovers", "")])
            raise ServerFailed(f"port {s.port} on {s.host} is already in use; choose another --port",
                               [Finding(PORT, "another process holds the port", "choose another --port", "")])
        argv = list(self.cmd.argv)
        self.work_dir.mkdir(parents=True, exist_ok=True)
        for f in self.cmd.files:
            target = self.work_dir / f.path
            target.write_text(f.content)
            argv = [str(target) if a == f.path else a for a in argv]
        argv[0] = resolve_executable(argv[0])
        env = dict(os.environ)
        env.update(dict(self.cmd.env))
        env.setdefault("PYTHONUNBUFFERED", "1")
        token = secrets.token_hex(8)
        env[process_tree.MARKER] = token
        cgroup = process_tree.make_cgroup(token) if self.use_cgroups else ""
        procs = os.path.join(cgroup, "cgroup.procs") if cgroup else ""
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        try:
            # O_NONBLOCK: a FIFO with no reader fails at once (ENXIO) instead of hanging the launch
            fd = os.open(self.log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK | os.O_CLOEXEC, 0o644)
        except OSError as err:
            from advisor.errors import BadInput

            raise BadInput(f"cannot open the server log ({err.strerror or err})", path=str(self.log_path)) from None
        os.set_blocking(fd, True)
        self._log = os.fdopen(fd, "a", encoding="utf-8")
        self._log.write(f"$ {self.cmd.display()}\n")
        self._log.flush()
        parent = os.getpid()
        self.started_at = time.monotonic()
        try:
            self.proc = _SPAWNER.call(lambda: subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env,
                start_new_session=True, preexec_fn=lambda: _child_setup(parent, procs), close_fds=True))
        except BaseException:
            process_tree.remove_cgroup(cgroup)
            raise
        _LIVE.add(self)
        try:
            started = psutil.Process(self.proc.pid).create_time()
        except psutil.Error:
            started = 0.0
        if cgroup and self.proc.pid not in process_tree.cgroup_pids(cgroup) and self.proc.poll() is None:
            process_tree.remove_cgroup(cgroup)           # the child could not join: track it without
            cgroup = ""
        self.tree = process_tree.Tree(token, self.proc.pid, started, cgroup)
        me = psutil.Process()
        host, boot = pidfile.this_boot()
        pidfile.write(pidfile.ServerRecord(
            pid=self.proc.pid, pgid=self.proc.pid, port=s.port, engine=self.engine, started=started,
            command_line=self.cmd.display(), log=str(self.log_path), token=token, cgroup=cgroup,
            owner_pid=me.pid, owner_started=me.create_time(), host=host, boot=boot), self.records_dir)
        self._reader = threading.Thread(target=self._read, name=f"{self.engine}-log", daemon=True)
        self._reader.start()
        return self

    def _read(self) -> None:
        assert self.proc and self.proc.stdout
        known = self.cmd.secrets
        for raw in _capped_lines(self.proc.stdout, MAX_LOG_LINE):
            text = raw.decode("utf-8", "replace").rstrip("\n")
            for part in (p for p in text.split("\r") if p.strip()):
                line = redact_text(part, known)
                with self._lock:
                    self.lines.append(line)
                    for f in match_line(self.engine, line):
                        if f.kind == READY:
                            self._ready_line = self._ready_line or line
                        elif not any(x.kind == f.kind and x.cause == f.cause for x in self.findings):
                            self.findings.append(f)
                    if line.startswith("FTLLM_PROGRESS "):
                        self.events.append(line[len("FTLLM_PROGRESS "):])
                try:
                    self._log.write(line + "\n")
                    self._log.flush()
                except ValueError:
                    pass
                if self.on_line:
                    self.on_line(line)
        self.proc.stdout.close()

    # ------------------------------------------------------------------ state
    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    @property
    def returncode(self) -> int | None:
        return self.proc.poll() if self.proc else None

    def tail(self, n: int = 30) -> list[str]:
        with self._lock:
            return list(self.lines)[-n:]

    def processes(self) -> list[psutil.Process]:
        """Every live process of the server: the leader, its descendants, and those that left."""
        if not self.proc or not self.tree:
            return []
        return process_tree.members(self.tree)

    def listener_is_ours(self) -> bool | None:
        """True when a process of this server listens on the port; None when that cannot be read."""
        port = self.cmd.settings.port
        unknown = False
        for p in self.processes():
            try:
                for c in p.net_connections(kind="inet"):
                    if c.status == psutil.CONN_LISTEN and c.laddr and c.laddr.port == port:
                        return True
            except psutil.AccessDenied:
                unknown = True
            except psutil.Error:
                continue
        return None if unknown else False

    # ------------------------------------------------------------------ readiness
    def wait_ready(self, timeout_s: float = 900.0, *, poll_s: float = 0.5,
                   on_progress: Callable[[Progress], None] | None = None, fatal_grace_s: float = 5.0) -> Ready:
        """Block until the engine's endpoints answer (and the listener is ours), or raise ServerFailed."""
        assert self.proc, "start() first"
        s = self.cmd.settings
        deadline = self.started_at + timeout_s
        fatal_since = None
        while True:
            rc = self.proc.poll()
            if rc is not None:
                self._drain()
                raise self.failure(f"{self.engine} exited with status {rc} before it was ready", rc)
            with self._lock:
                fatal = [f for f in self.findings if f.fatal]
            if fatal:
                fatal_since = fatal_since or time.monotonic()
                if fatal_since and time.monotonic() - fatal_since > fatal_grace_s:
                    raise self.failure(f"{self.engine} reported: {fatal[0].cause}", None)
            result = probe(self.engine, s.base_url, api_key=s.api_key, timeout_s=min(2.0, poll_s * 4))
            event = spec.ready_event if (spec := engines.find(self.engine)) else ""   # FastLLM's startup.ready
            event_ready = bool(event) and any(event in e for e in self.events)
            if (result.ok or event_ready) and not fatal and self.listener_is_ours() is not False:
                with self._lock:
                    warnings = tuple(f for f in self.findings if not f.fatal)
                return Ready(time.monotonic() - self.started_at, s.base_url, result, warnings)
            now = time.monotonic()
            if on_progress:
                first = result.statuses[0][1] if result.statuses else "connection refused"
                phase = "starting" if first == "connection refused" else "loading"
                tail = self.tail(1)
                on_progress(Progress(now - self.started_at, phase, tail[0] if tail else "", result.summary,
                                     list(self.events[-3:])))
            if now > deadline:
                raise self.failure(f"{self.engine} was not ready after {timeout_s:.0f} s "
                                    f"(last probe: {result.summary})", None, timeout=True)
            time.sleep(poll_s)

    def _drain(self) -> None:
        if self._reader:
            self._reader.join(timeout=3.0)

    def failure(self, message: str, rc: int | None, timeout: bool = False) -> ServerFailed:
        """A ServerFailed carrying the diagnosis of everything logged so far."""
        with self._lock:
            lines = list(self.lines)
        findings = diagnose(self.engine, lines, rc)
        if timeout and not any(f.fatal for f in findings):
            findings.insert(0, Finding(NOT_READY, "the server never became ready",
                                       "raise --ready-timeout for big checkpoints, or read the log tail", ""))
        if findings and findings[0].fatal and rc is not None and findings[0].kind != FATAL:
            message = f"{message}: {findings[0].cause}"
        return ServerFailed(message, findings, lines[-30:], rc)

    # ------------------------------------------------------------------ stop
    def stop(self, *, int_timeout_s: float = 10.0, term_timeout_s: float = 10.0,
             kill_timeout_s: float = 5.0) -> StopResult:
        if not self.proc or not self.tree:
            return StopResult(None, 0.0, None)
        result = stop_tree(self.tree, self.proc, int_timeout_s, term_timeout_s, kill_timeout_s)
        if not result.survivors:
            process_tree.remove_cgroup(self.tree.cgroup)
        self._drain()
        try:
            self._log.close()
        except (AttributeError, ValueError):
            pass
        pidfile.remove(self.cmd.settings.port, self.records_dir, pid=self.proc.pid)
        _LIVE.discard(self)
        return result

    def __enter__(self) -> "Server":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def stop_tree(tree: process_tree.Tree, leader: subprocess.Popen | None = None, int_timeout_s: float = 10.0,
              term_timeout_s: float = 10.0, kill_timeout_s: float = 5.0) -> StopResult:
    """SIGINT, then SIGTERM, then SIGKILL to every process of the tree, each with its own timeout."""
    t0 = time.monotonic()
    procs = process_tree.members(tree)
    if not procs and (leader is None or leader.poll() is not None):
        return StopResult(None, 0.0, leader.returncode if leader else None)
    escaped = process_tree.describe(process_tree.outside_group(tree, procs))
    used = None
    for sig, wait in ((signal.SIGINT, int_timeout_s), (signal.SIGTERM, term_timeout_s),
                      (signal.SIGKILL, kill_timeout_s)):
        procs = process_tree.members(tree)
        if not procs and (leader is None or leader.poll() is not None):
            break
        escaped += tuple(d for d in process_tree.describe(process_tree.outside_group(tree, procs))
                         if d not in escaped)           # also those that left the group meanwhile
        process_tree.signal_all(tree, sig, procs)
        used = sig.name
        if process_tree.wait_gone(tree, wait, leader):
            return StopResult(used, time.monotonic() - t0, leader.returncode if leader else None, (), escaped)
    survivors = tuple(p.pid for p in process_tree.members(tree))
    return StopResult(used, time.monotonic() - t0, leader.poll() if leader else None, survivors, escaped)


def stop_leftover(rec: pidfile.ServerRecord, **timeouts) -> StopResult:
    result = stop_tree(rec.tree, None, **timeouts)
    if not result.survivors:
        process_tree.remove_cgroup(rec.cgroup)
    pidfile.remove_record(rec)
    return result


def _capped_lines(stream, limit: int):
    """Lines of a binary stream, each cut to ``limit`` bytes: the rest of a longer line is read and
    dropped piece by piece (memory stays at ``limit``), and the kept part says how much went."""
    while True:
        line = stream.readline(limit + 1)
        if not line:
            return
        if len(line) > limit and not line.endswith(b"\n"):
            dropped = len(line) - limit
            while True:
                rest = stream.readline(limit)
                dropped += len(rest) - rest.endswith(b"\n")
                if not rest or rest.endswith(b"\n"):
                    break
            line = line[:limit] + f" [... {dropped:,} more bytes of this line dropped]\n".encode()
        yield line


@atexit.register
def _stop_all() -> None:  # the advisor is exiting normally (or on Ctrl-C): take servers down with it
    for server in list(_LIVE):
        try:
            server.stop(int_timeout_s=2.0, term_timeout_s=2.0, kill_timeout_s=2.0)
        except Exception:  # noqa: BLE001 - never block interpreter exit
            pass
