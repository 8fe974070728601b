"""Hard-link a venv's files to identical copies in venvs built before it (same disk, stdlib only).

The test set-up builds four venvs that each carry the same torch 2.13.0 CPU wheel and, three of them, the
same triton 3.9.0 (about 1.75 GB a venv), plus sympy, numpy and other shared pins: some 4 GB of identical
files. A CI machine with a small disk stopped at the third venv. A file is linked only when its path under
site-packages, size, mode and bytes are the same; a venv's own install never writes into an installed file
(pip and Python replace files, never rewrite them), so a link cannot leak a change from one venv into another.

Usage: python3 .ci/dedupe.py NEW_VENV EARLIER_VENV [EARLIER_VENV ...]   (prints one summary line)
"""

from __future__ import annotations

import filecmp
import os
import sys
from pathlib import Path


def site_packages(venv: Path) -> Path | None:
    found = sorted(venv.glob("lib/python*/site-packages"))
    return found[0] if found else None


def dedupe(new: Path, earlier: list[Path]) -> tuple[int, int]:
    """Link NEW's files to identical ones in EARLIER; returns (files linked, bytes saved)."""
    target = site_packages(new)
    sources = [s for s in (site_packages(e) for e in earlier) if s is not None]
    if target is None or not sources:
        return 0, 0
    linked = saved = 0
    for dirpath, _dirs, files in os.walk(target):
        for name in files:
            path = Path(dirpath) / name
            rel = path.relative_to(target)
            try:
                st = path.lstat()
            except OSError:
                continue
            if not path.is_file() or path.is_symlink() or st.st_size < 4096 or st.st_nlink > 1:
                continue
            for src_site in sources:
                src = src_site / rel
                try:
                    sst = src.lstat()
                except OSError:
                    continue
                if (not src.is_file() or src.is_symlink() or sst.st_size != st.st_size
                        or sst.st_mode != st.st_mode or sst.st_dev != st.st_dev):
                    continue
                if not filecmp.cmp(src, path, shallow=False):
                    continue
                tmp = path.with_name(path.name + ".dedupe-tmp")
                try:
                    os.link(src, tmp)
                    os.replace(tmp, path)
                except OSError:
                    tmp.unlink(missing_ok=True)
                    continue
                linked += 1
                saved += st.st_size
                break
    return linked, saved


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    new, *earlier = (Path(a) for a in argv)
    try:
        linked, saved = dedupe(new, [e for e in earlier if e.is_dir()])
    except OSError as e:       # a saving, never a reason to stop the set-up
        print(f"{new.name}: not deduplicated ({e}); it keeps its own copies")
        return 0
    print(f"{new.name}: {linked} files linked to identical copies in earlier venvs, {saved / 2**30:.2f} GiB saved")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
