"""Where a conversion writes: DST is checked before hours of work, the output is staged in a hidden
folder next to it and renamed into place at the end, and partial folders of killed runs are removed."""

from __future__ import annotations

import errno
import os
import shutil
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from advisor.errors import BadInput


def check_destination(src: Path, dst: Path) -> None:
    """Everything that would make the final rename fail, checked before hours of work."""
    src_r, dst_r = src.resolve(), dst.resolve()
    if dst_r == src_r or src_r in dst_r.parents:
        raise BadInput("destination is the source or inside it; the source is never written", path=str(dst))
    if dst.is_symlink():
        raise BadInput("destination is a symbolic link; give the folder it points to (the finished output "
                       "is moved into place by a rename)", path=str(dst))
    cwd = Path.cwd().resolve()
    if dst_r == cwd or dst_r in cwd.parents:
        raise BadInput("destination is the current folder or contains it; name a new folder "
                       "(the finished output is moved into place by a rename)", path=str(dst))
    if dst.exists():
        if not dst.is_dir():
            raise BadInput("destination exists and is not a folder", path=str(dst))
        if any(dst.iterdir()):
            raise BadInput("destination folder is not empty; refusing to overwrite", path=str(dst))
    if not dst_r.parent.is_dir():
        raise BadInput("parent folder of the destination does not exist", path=str(dst))


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:          # EPERM: alive, someone else's
        return True
    return True


def remove_stale_partials(dst: Path) -> list[str]:
    """Partial folders of DST left by a killed run (SIGKILL, power loss) whose process is gone."""
    removed = []
    prefix = f".{dst.name}.partial-"
    for p in dst.resolve().parent.iterdir():      # not glob(): DST may contain [ or *
        if not p.name.startswith(prefix):
            continue
        pid = p.name[len(prefix):]
        if pid.isdigit() and int(pid) != os.getpid() and not _pid_alive(int(pid)) and p.is_dir():
            shutil.rmtree(p, ignore_errors=True)
            removed.append(p.name)
    return removed


def _temp_dir(dst: Path) -> Path:
    tmp = dst.resolve().parent / f".{dst.name}.partial-{os.getpid()}"
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir()
    return tmp


@contextmanager
def staged_output(dst_dir: Path) -> Iterator[Path]:
    """A hidden folder next to DST_DIR, renamed to it when the block ends: nobody ever sees half a
    checkpoint. Any failure removes the folder; an OS failure is one line naming DST_DIR."""
    try:
        tmp = _temp_dir(dst_dir)
    except OSError as err:
        raise BadInput(f"cannot create the temporary output folder next to the destination: "
                       f"{err.strerror or err}", path=str(dst_dir.resolve().parent)) from None
    try:
        yield tmp
        if dst_dir.exists():
            dst_dir.rmdir()            # empty (checked before); rename needs the name free
        os.rename(tmp, dst_dir)
    except OSError as err:
        shutil.rmtree(tmp, ignore_errors=True)
        what = "disk full" if err.errno in (errno.ENOSPC, errno.EFBIG, errno.EDQUOT) else "write failed"
        raise BadInput(f"{what}: {err.strerror or err}; nothing was written", path=str(dst_dir)) from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
