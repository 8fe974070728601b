"""Reading a user-named file without hanging or filling memory.

A FIFO blocks open()/read() until a writer comes; /dev/zero never ends. Every reader of a file the
user names (configs, plans, logs, workloads, calibrations) goes through here: only regular files
are read, up to a size cap, and every problem is one BadInput line naming the file.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from advisor.errors import BadInput

MiB = 1024 * 1024
JSON_LIMIT = 64 * MiB          # configs, plans, bench/microbench documents, workloads, profiles
LOG_TAIL = 16 * MiB            # an engine log: only its last part is read

NOT_REGULAR = "not a regular file (FIFO, socket or device)"


class NotRegularFile(BadInput):
    """A FIFO, socket or device where a file was expected: an engine would hang on it too, so
    callers that shrug off an unreadable file (a note instead of an error) still stop here."""


def os_problem(err: OSError) -> str:
    """The user-facing words for an OSError (no temp-file names, no errno numbers)."""
    if err.errno == errno.ENOENT:
        return "no such file or folder"
    if err.errno in (errno.EACCES, errno.EPERM):
        return "permission denied"
    if err.errno == errno.ELOOP:
        return "symlink loop"
    if err.errno == errno.EISDIR:
        return "is a directory"
    if err.errno == errno.ENOTDIR:
        return "a part of the path is not a folder"
    if err.errno == errno.ENOSPC:
        return "no space left on the device"
    if err.errno == errno.EROFS:
        return "read-only file system"
    return err.strerror or type(err).__name__


def _size(n: int) -> str:
    return f"{n // MiB} MiB" if n >= MiB else f"{n} bytes"


def read_bytes(path: str | Path, *, limit_bytes: int = JSON_LIMIT, what: str = "file", tail: bool = False) -> bytes:
    """The bytes of regular file ``path``. Larger than ``limit_bytes``: BadInput, or with ``tail``
    its last ``limit_bytes``. A FIFO, socket or device is refused before it is opened."""
    return _read(path, limit_bytes, what, tail)[0]


def _read(path: str | Path, limit_bytes: int, what: str, tail: bool) -> tuple[bytes, bool]:
    """(bytes, whether the start was cut off)."""
    p = os.fspath(Path(path).expanduser())
    label = os.fspath(path)
    try:
        # stat first: opening a FIFO (even with O_NONBLOCK for a writer-less pipe) or a device is
        # never needed; fstat after open closes the swap-in race
        mode = os.stat(p).st_mode
        if stat.S_ISDIR(mode):
            raise BadInput(f"cannot read {what} (is a directory)", path=label)
        if not stat.S_ISREG(mode):
            raise NotRegularFile(NOT_REGULAR, path=label)
        fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as err:
        raise BadInput(f"cannot read {what} ({os_problem(err)})", path=label) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise NotRegularFile(NOT_REGULAR, path=label)
        if st.st_size > limit_bytes:
            if not tail:
                raise BadInput(f"{what} is larger than {_size(limit_bytes)} ({_size(st.st_size)})", path=label)
            os.lseek(fd, st.st_size - limit_bytes, os.SEEK_SET)
        cut = st.st_size > limit_bytes
        chunks, left = [], limit_bytes + 1        # the file may grow while read: never past the cap
        while left > 0:
            chunk = os.read(fd, min(left, MiB))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
    except OSError as err:
        raise BadInput(f"cannot read {what} ({os_problem(err)})", path=label) from None
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if len(data) > limit_bytes:
        if not tail:
            raise BadInput(f"{what} is larger than {_size(limit_bytes)}", path=label)
        data, cut = data[-limit_bytes:], True
    return data, cut


def read_text(path: str | Path, *, limit_bytes: int = JSON_LIMIT, what: str = "file", tail: bool = False) -> str:
    """UTF-8 text of ``path`` (see read_bytes). With ``tail`` (logs) undecodable bytes are replaced
    and a first line cut by the tail is dropped; otherwise non-UTF-8 is a BadInput."""
    data, cut = _read(path, limit_bytes, what, tail)
    if tail:
        text = data.decode("utf-8", errors="replace")
        return text.split("\n", 1)[1] if cut and "\n" in text else text
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise BadInput(f"{what} is not UTF-8 (byte {err.start})", path=os.fspath(path)) from None
