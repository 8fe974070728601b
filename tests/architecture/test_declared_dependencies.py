"""Every runtime dependency pyproject.toml declares is imported by the shipped code (a user installs
nothing the advisor never loads), and every third-party module the shipped code imports is declared."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ("advisor", "launchers", "kernels", "profiles")
# distribution name -> the module it provides, where the two differ
MODULE_OF = {"nvidia-ml-py": "pynvml", "pyyaml": "yaml", "textual-plotext": "textual_plotext"}

if sys.version_info < (3, 11):
    pytest.skip("tomllib needs Python 3.11", allow_module_level=True)


def _declared() -> tuple[list[str], dict[str, list[str]]]:
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    name = lambda spec: re.split(r"[<>=!~\[; ]", spec, maxsplit=1)[0].strip().lower()   # noqa: E731
    extras = {k: [name(s) for s in v] for k, v in project.get("optional-dependencies", {}).items()}
    return [name(s) for s in project["dependencies"]], extras


def _imported() -> set[str]:
    """Top-level modules the shipped code imports (the offline distillation script that needs pandas lives in
    benchmarks/, outside the shipped packages)."""
    import ast

    found = set()
    for pkg in SHIPPED:
        for path in (ROOT / pkg).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Import):
                    found.update(a.name.split(".")[0] for a in node.names)
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    found.add(node.module.split(".")[0])
    return found


def test_every_declared_runtime_dependency_is_imported():
    deps, _ = _declared()
    imported = _imported()
    unused = [d for d in deps if MODULE_OF.get(d, d.replace("-", "_")) not in imported]
    assert not unused, f"declared in [project] dependencies but imported by no shipped module: {unused}"


def test_every_third_party_import_is_declared():
    deps, extras = _declared()
    provided = {MODULE_OF.get(d, d.replace("-", "_")) for d in deps + extras.get("kernels", [])}
    local = set(SHIPPED) | set(sys.stdlib_module_names) | {"__future__"}
    # engines and oracles are optional and imported only behind a guard where they are installed
    optional = {"vllm", "sglang", "ftllm", "transformers", "torch", "triton", "safetensors", "modelopt",
                "llmcompressor"}
    missing = sorted(m for m in _imported() - local - provided - optional)
    assert not missing, f"imported by shipped code but not declared: {missing}"
