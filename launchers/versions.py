"""Engine versions: detection at the edge and version gates for flags.

A gate records the versions in which a flag (or flag value) is known to exist, from the research
notes (../shared/research/engines-launch.md, vllm-kernel-selection.md). Boundaries are the
earliest/latest versions actually read, so a gate may be conservative; the message says so.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from advisor import engines
from advisor.errors import Unsupported

# Asked of the engine's own interpreter: the first of the distributions it has installed.
_ASK = ("import importlib.metadata as m, sys\n"
        "for d in sys.argv[1:]:\n"
        "    try:\n        print(m.version(d)); break\n"
        "    except m.PackageNotFoundError:\n        pass\n")
_TRAMPOLINE = re.compile(r"^'''exec' \"?([^\"\s]+)\"?", re.M)     # pip's launcher for long interpreter paths


def parse(version: str | None) -> tuple[int, ...]:
    """'0.5.23' -> (0, 5, 23); 'b11434' -> (11434,); pre-release tails are ignored."""
    if not version:
        return ()
    m = re.match(r"[vb]?(\d+(?:\.\d+)*)", version.strip())
    return tuple(int(p) for p in m.group(1).split(".")[:4]) if m else ()


@dataclass(frozen=True)
class DetectedVersion:
    version: str | None
    how: str                     # "transformers at /venv/bin/transformers (its Python)", "vllm --version",
                                 # "not installed"


def find_executable(name: str) -> str | None:
    """Where the launcher finds ``name``: PATH first, then next to this interpreter (as
    launchers/supervisor.py resolve_executable does)."""
    return shutil.which(name) or shutil.which(name, path=str(Path(sys.executable).parent))


def python_of(path: str) -> list[str] | None:
    """The interpreter a console script runs with (its shebang, or pip's `exec` trampoline); the
    program itself when it is a Python; None for a native program."""
    if Path(path).name.startswith("python"):
        return [path]
    try:
        with open(path, "rb") as f:
            head = f.read(1024).decode("utf-8", "replace")
    except OSError:
        return None
    if not head.startswith("#!"):
        return None
    tramp = _TRAMPOLINE.search(head)
    if tramp and "python" in tramp.group(1):
        return [tramp.group(1)]
    first = head[2:].splitlines()[0].strip()
    return first.split() if "python" in first else None


def detect_version(engine: str, *, timeout_s: float = 20.0) -> DetectedVersion:
    """The version of the engine the command will run (edge code: reads PATH and runs the program).
    A console script's own interpreter is asked for its package version, so an engine installed in
    another environment is seen as it is; a native program (llama-server) answers `--version`."""
    spec = engines.find(engine)    # the programs its command runs: their version, wherever they live
    dists = spec.distributions if spec else ()
    for name in spec.executables if spec else ():
        path = find_executable(name)
        if not path:
            continue
        python = python_of(path)
        if python is not None and dists:
            found = _ask(python + ["-c", _ASK, *dists], timeout_s)
            if found:
                return DetectedVersion(found, f"{name} at {path} (its Python)")
            if name.startswith("python"):
                continue                    # an interpreter without the engine is not the engine
        if python is None or (spec and spec.version_flag):
            found = version_from_output(_ask([path, "--version"], timeout_s, raw=True) or "")
            if found:
                return DetectedVersion(found, f"{name} --version")
        return DetectedVersion(None, f"{name} at {path} did not tell its version")
    return DetectedVersion(None, "not installed")


def _ask(argv: list[str], timeout_s: float, raw: bool = False) -> str | None:
    """The program's answer: its last stdout line (``raw``: all it printed), None when it failed."""
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if raw:
        return out.stdout + "\n" + out.stderr
    lines = out.stdout.strip().splitlines()
    return lines[-1].strip() if out.returncode == 0 and lines else None


_BUILD = re.compile(r"^\s*version:\s*(\d+)", re.M)                       # llama.cpp: "version: 5191 (...)"
_BARE = re.compile(r"^\s*v?(\d+\.\d+(?:\.\d+)*(?:[.+-]?[A-Za-z0-9.+-]*)?)\s*$", re.M)  # vLLM: "0.33.0"


def version_from_output(text: str) -> str | None:
    """The version in an engine's `--version` output. Start-up log lines come first in some engines
    (vLLM logs the detected platform), so only a `version: N` line or a line holding nothing but a
    version counts, the last one winning; a number inside a log line is not a version."""
    m = _BUILD.search(text)
    if m:
        return m.group(1)
    bare = _BARE.findall(text)
    return bare[-1] if bare else None


def resolve(engine: str, requested: str | None, detected: DetectedVersion | None) -> tuple[str | None, str | None]:
    """Pick the version whose flag set is used, and a note saying why."""
    if requested:
        return requested, None
    if detected and detected.version:
        return detected.version, f"{engine} {detected.version} detected ({detected.how})"
    why = (f"{engine}: {detected.how}" if detected and detected.how != "not installed"
           else f"{engine} is not installed here")
    ref = spec.reference_version if (spec := engines.find(engine)) else None     # the version whose flags were read
    if ref:
        return ref, f"{why}; using the flags of {ref} (the version the advisor's flag tables were read from)"
    return None, f"{why}; using the flags of the newest build the advisor read"


@dataclass(frozen=True)
class Gate:
    what: str                    # e.g. "--kv-cache-dtype nvfp4"
    since: str | None = None     # first version known to have it
    until: str | None = None     # first version known NOT to have it
    source: str = ""
    hint: str = ""               # what to use instead

    def allows(self, version: str | None) -> bool:
        v = parse(version)
        if not v:
            return True          # unknown version: the reference flag set applies
        if self.since and v < parse(self.since):
            return False
        if self.until and v >= parse(self.until):
            return False
        return True


def require(engine: str, version: str | None, gate: Gate) -> None:
    """Refuse a flag the targeted version lacks, with a message naming the versions."""
    if gate.allows(version):
        return
    if gate.since and parse(version) < parse(gate.since):
        why = f"first seen in {gate.since}"
    else:
        why = f"removed by {gate.until}"
    hint = f"; {gate.hint}" if gate.hint else ""
    src = f" [{gate.source}]" if gate.source else ""
    raise Unsupported(f"{engine} {version} has no {gate.what} ({why}){hint}{src}")


def check_removed(engine: str, version: str | None, args: tuple[str, ...], removed: tuple[Gate, ...]) -> None:
    """Refuse user-supplied extra flags that the version no longer has."""
    for arg in args:
        flag = arg.split("=", 1)[0]
        for gate in removed:
            if flag == gate.what:
                require(engine, version, gate)
