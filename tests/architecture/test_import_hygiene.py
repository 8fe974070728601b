"""Import hygiene, checked in fresh interpreters.

- every core module (advisor/**/*.py except advisor/cli.py, advisor/__main__.py, advisor/rich_render.py and
  advisor/tui/) imports, and without pulling in textual or rich (only the CLI and the TUI render);
- building the CLI parser (what `nvfp4-advisor --help` does) imports no torch, triton, textual,
  rich or pydantic; the GPU table modules load pydantic and yaml only when a table is read.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ADVISOR = ROOT / "advisor"


def core_modules() -> list[str]:
    mods = []
    for path in sorted(ADVISOR.rglob("*.py")):
        rel = path.relative_to(ROOT)
        if rel.parts[1] == "tui" or rel.as_posix() in ("advisor/cli.py", "advisor/__main__.py",
                                                       "advisor/rich_render.py"):
            continue
        parts = list(rel.with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        mods.append(".".join(parts))
    return mods


# Each module is imported in a forked child of one small interpreter: isolated like a fresh
# process per module, without paying interpreter start-up 70 times.
_PROBE = r"""
import importlib, json, os, sys
WATCH = ("textual", "rich")
out = {}
for name in json.loads(sys.argv[1]):
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            importlib.import_module(name)
            res = {"loaded": sorted({m.split(".")[0] for m in sys.modules} & set(WATCH))}
        except BaseException as e:
            res = {"error": f"{type(e).__name__}: {e}"}
        os.write(w, json.dumps(res).encode())
        os._exit(0)
    os.close(w)
    data = b""
    while True:
        chunk = os.read(r, 65536)
        if not chunk:
            break
        data += chunk
    os.close(r)
    os.waitpid(pid, 0)
    out[name] = json.loads(data or b'{"error": "child died"}')
print(json.dumps(out))
"""

MODULES = core_modules()


@pytest.fixture(scope="module")
def import_report() -> dict:
    proc = subprocess.run([sys.executable, "-c", _PROBE, json.dumps(MODULES)], cwd=ROOT,
                          capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_core_modules_found():
    assert "advisor.gpu_table" in MODULES and "advisor.arch_caps" in MODULES
    assert "advisor.commands.gpus" in MODULES
    assert not any(m.startswith("advisor.tui") or m == "advisor.cli" for m in MODULES)


@pytest.mark.parametrize("module", MODULES)
def test_core_module_imports_no_renderer(import_report, module):
    res = import_report[module]
    assert "error" not in res, f"{module} failed to import: {res.get('error')}"
    assert not {"textual", "rich"} & set(res["loaded"]), f"{module} imports {res['loaded']}"


def test_cli_help_is_light():
    code = (
        "import json, sys\n"
        "from advisor.cli import build_parser\n"
        "p = build_parser()\n"
        "p.format_help()\n"
        "for a in p._subparsers._group_actions:\n"
        "    for sub in a.choices.values():\n"
        "        sub.format_help()\n"
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr[-2000:]
    loaded = set(json.loads(proc.stdout.strip().splitlines()[-1]))
    assert "advisor" in loaded
    for heavy in ("torch", "triton", "textual", "rich", "pydantic"):
        assert heavy not in loaded, f"`nvfp4-advisor --help` imports {heavy}"


def test_gpu_table_modules_load_pydantic_and_yaml_lazily():
    code = ("import sys, advisor.gpu_table, advisor.arch_caps, advisor.commands.gpus\n"
            "print(sorted({'pydantic', 'yaml'} & {m.split('.')[0] for m in sys.modules}))")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "[]"
