"""How to add an optional extra (torch + triton: ``kernels``) to the environment this advisor runs in.

From a clone (`bash .ci/dev run` installs it editable) the PyPI name would fetch another copy, so
the hint names the clone and this interpreter; an installed wheel gets the package name.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path


def source_tree() -> Path | None:
    """The clone this advisor is imported from (its pyproject.toml names the project), or None."""
    root = Path(__file__).resolve().parents[1]
    try:
        text = (root / "pyproject.toml").read_text(encoding="utf-8")
    except OSError:
        return None
    return root if 'name = "nvfp4-advisor"' in text else None


def install_extra(extra: str) -> str:
    """The command that installs ``extra`` where this advisor runs, e.g.
    `/clone/.venv/bin/python -m pip install -e '/clone[kernels]'`."""
    root = source_tree()
    target = f"{root}[{extra}]" if root is not None else f"nvfp4-advisor[{extra}]"
    editable = "-e " if root is not None else ""
    return f"{shlex.quote(sys.executable)} -m pip install {editable}{shlex.quote(target)}"
