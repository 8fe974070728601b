"""200 seeded hostile checkpoint folders through every command that reads a checkpoint.

Each call must end in time with an exit code the README documents (0, 1, 3, 4; never 2: the
command lines are valid), and a failure is one line naming the problem (exit 1 and 4 may print a
document instead). Counted and required to be zero: tracebacks, "internal error" lines (a bug
caught by the last line of defence), hangs (a call slower than 20 s), multi-line or
control-character error lines. Two worker processes share the folders (CI has two cores).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from reliability_support import HERE
from reliability_folders import commands, folders

pytestmark = pytest.mark.timeout(900)
COUNT = 200
WORKERS = 2


def test_hostile_folders_through_every_command(tmp_path):
    made = [str(folder) for folder, _ in folders(tmp_path / "ckpts", seed=2113, count=COUNT)]
    procs = []
    for w in range(WORKERS):
        out = tmp_path / f"out{w}"
        out.mkdir()
        procs.append(subprocess.Popen([sys.executable, str(HERE / "reliability_folders.py"), str(out),
                                       *made[w::WORKERS]], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      stdin=subprocess.DEVNULL, text=True))
    found = {"calls": 0, "codes": {}, "tracebacks": [], "internal": [], "hangs": [], "bad_lines": []}
    for p in procs:
        stdout, stderr = p.communicate(timeout=840)
        assert p.returncode == 0, stderr[-2000:]
        part = json.loads(stdout)
        for k, v in part.items():
            if k == "codes":
                for code, n in v.items():
                    found["codes"][code] = found["codes"].get(code, 0) + n
            else:
                found[k] += v
    assert found["calls"] == COUNT * len(commands("x", "y"))
    assert found["tracebacks"] == [], found["tracebacks"][:5]
    assert found["internal"] == [], f"{len(found['internal'])} internal errors, e.g. {found['internal'][:5]}"
    assert found["hangs"] == [], found["hangs"]
    assert found["bad_lines"] == [], found["bad_lines"][:5]
    assert found["codes"].get("0", 0) > COUNT and found["codes"].get("3", 0) > COUNT   # both are common
