""".ci/dedupe.py: the test set-up keeps one copy of the files its venvs share (torch, triton, ...), and never
links two files that differ in bytes, mode or place."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / ".ci" / "dedupe.py"


def _venv(root: Path, name: str, files: dict[str, bytes]) -> Path:
    venv = root / name
    site = venv / "lib" / "python3.11" / "site-packages"
    for rel, data in files.items():
        p = site / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
    return venv


def _site(venv: Path, rel: str) -> Path:
    return venv / "lib" / "python3.11" / "site-packages" / rel


def test_links_identical_files_only(tmp_path):
    big = os.urandom(8192)
    other = bytearray(big)
    other[-1] ^= 1
    first = _venv(tmp_path, ".venv", {"torch/lib/a.so": big, "pkg/b.py": big, "pkg/c.py": big,
                                      "pkg/small.py": b"x = 1\n"})
    second = _venv(tmp_path, ".venv-vllm", {"torch/lib/a.so": big, "pkg/b.py": bytes(other),
                                            "elsewhere/c.py": big, "pkg/small.py": b"x = 1\n"})
    os.chmod(_site(first, "pkg/c.py"), 0o755)

    out = subprocess.run([sys.executable, str(SCRIPT), str(second), str(first)],
                         capture_output=True, text=True, check=True).stdout
    assert "1 files linked" in out

    same = _site(second, "torch/lib/a.so")
    assert same.stat().st_ino == _site(first, "torch/lib/a.so").stat().st_ino
    assert same.read_bytes() == big
    # one byte apart, another path, or below the size worth a link: own copies
    assert _site(second, "pkg/b.py").stat().st_ino != _site(first, "pkg/b.py").stat().st_ino
    assert _site(second, "pkg/b.py").read_bytes() == bytes(other)
    assert _site(second, "elsewhere/c.py").stat().st_nlink == 1
    assert _site(second, "pkg/small.py").stat().st_nlink == 1
    assert not list(tmp_path.rglob("*.dedupe-tmp"))


def test_mode_must_match_and_a_second_run_changes_nothing(tmp_path):
    data = os.urandom(5000)
    first = _venv(tmp_path, "a", {"bin.so": data})
    second = _venv(tmp_path, "b", {"bin.so": data})
    os.chmod(_site(first, "bin.so"), 0o755)
    os.chmod(_site(second, "bin.so"), 0o644)
    out = subprocess.run([sys.executable, str(SCRIPT), str(second), str(first)],
                         capture_output=True, text=True, check=True).stdout
    assert "0 files linked" in out
    os.chmod(_site(second, "bin.so"), 0o755)
    subprocess.run([sys.executable, str(SCRIPT), str(second), str(first)], check=True, capture_output=True)
    out = subprocess.run([sys.executable, str(SCRIPT), str(second), str(first)],
                         capture_output=True, text=True, check=True).stdout
    assert "0 files linked" in out           # already one file
    assert _site(second, "bin.so").stat().st_nlink == 2


def test_missing_venvs_are_not_an_error(tmp_path):
    r = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path / "new"), str(tmp_path / "gone")],
                       capture_output=True, text=True)
    assert r.returncode == 0 and "0 files linked" in r.stdout
    r = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True)
    assert r.returncode == 2 and "usage" in r.stderr.lower()
