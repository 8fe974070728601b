"""A Report as text (md | json | html), its JSON Schema check, and the atomic write to disk."""

from __future__ import annotations

import errno
import functools
import json
import os
import stat
import tempfile
from pathlib import Path

from advisor.errors import BadInput, UsageError

FORMATS = ("md", "json", "html")
SCHEMA_FILE = "report.schema.json"


@functools.lru_cache(maxsize=1)
def schema() -> dict:
    """The shipped JSON Schema (package data next to this module)."""
    from importlib.resources import files

    return json.loads(files("advisor.report").joinpath(SCHEMA_FILE).read_text(encoding="utf-8"))


def _short(text: str, limit: int = 240) -> str:
    """jsonschema quotes the whole offending instance; keep an error one readable line."""
    return text if len(text) <= limit else text[:limit] + " …"


def schema_errors(data: dict) -> list[str]:
    """Every way ``data`` violates the report schema, as 'path: message' lines (empty: valid)."""
    import jsonschema

    validator = jsonschema.Draft202012Validator(schema(), format_checker=jsonschema.FormatChecker())
    out = []
    for e in sorted(validator.iter_errors(data), key=lambda e: list(map(str, e.absolute_path))):
        # a oneOf/anyOf failure quotes the whole instance; name the deepest sub-error instead
        while e.context:
            e = max(e.context, key=lambda c: len(c.absolute_path))
        out.append(f"{'/'.join(str(p) for p in e.absolute_path) or '<root>'}: {_short(e.message)}")
    return out


def render(report, fmt: str) -> str:
    if fmt == "json":
        from advisor.jsonout import dumps

        return dumps(report.data) + "\n"
    if fmt == "md":
        from advisor.report.markdown import to_markdown

        return to_markdown(report.doc)
    if fmt == "html":
        from advisor.report.html import to_html

        return to_html(report.doc, report.title, report.folded, report.answer)
    raise UsageError(f"unknown report format {fmt!r} (choose from {', '.join(FORMATS)})")


EXISTS_HINT = "add --force to overwrite it"


def _existing(target: Path, overwrite: bool, exists_hint: str) -> None:
    """Refuse an existing target that is not a plain regular file, and one the user did not allow
    us to replace. A device, FIFO or symlink would be *replaced* by the rename in write_atomic."""
    try:
        st = os.lstat(target)
    except FileNotFoundError:
        return
    except OSError as err:
        from advisor.textfile import os_problem

        raise BadInput(f"cannot check the output file ({os_problem(err)})", path=str(target)) from None
    if stat.S_ISLNK(st.st_mode):
        raise BadInput("is a symbolic link; refusing to replace it (name the file itself)", path=str(target))
    if stat.S_ISDIR(st.st_mode):
        raise BadInput("is a directory; give a file name", path=str(target))
    if not stat.S_ISREG(st.st_mode):
        raise BadInput("not a regular file (FIFO, socket or device); refusing to write to it", path=str(target))
    if not overwrite:
        raise BadInput(f"already exists; {exists_hint}", path=str(target))


def check_target(path: str | Path, protect: tuple[str | Path, ...] = (), *, overwrite: bool = False,
                 exists_hint: str = EXISTS_HINT) -> Path:
    """Refuse a missing directory, a directory, a symlink, FIFO, socket or device as target, an
    existing file unless ``overwrite``, and anything inside a protected path."""
    target = Path(path).expanduser()
    parent = target.parent if str(target.parent) else Path(".")
    if not parent.is_dir():
        raise BadInput("output directory does not exist", path=str(parent))
    if target.is_dir():
        raise BadInput("is a directory; give a file name", path=str(target))
    resolved = target.resolve()
    for p in protect:
        pp = Path(p).expanduser()
        if not pp.exists():
            continue
        pr = pp.resolve()
        # The checkpoint file itself, or any existing file of a checkpoint folder (a new report
        # file next to them is fine).
        if resolved == pr or (pr.is_dir() and pr in resolved.parents and resolved.exists()):
            raise BadInput("refusing to overwrite a file of the checkpoint", path=str(target))
    _existing(target, overwrite, exists_hint)
    return target


def write_atomic(path: str | Path, text: str, *, overwrite: bool = False, exists_hint: str = EXISTS_HINT) -> Path:
    """Write via a temp file in the same directory + rename: a reader never sees half a report.
    The target is checked again here (it may have changed since check_target); any OS failure is
    one BadInput line naming the target, never the temp file."""
    from advisor.textfile import os_problem

    target = Path(path).expanduser()
    _existing(target, overwrite, exists_hint)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=str(target.parent or "."))
    except OSError as err:
        problem = os_problem(err) if err.errno != errno.ENOENT else "the folder does not accept new files"
        raise BadInput(f"cannot write the file here ({problem})", path=str(target)) from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o644)
        _existing(target, overwrite, exists_hint)
        os.replace(tmp, target)
    except BaseException as err:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(err, OSError):
            raise BadInput(f"cannot write the file ({os_problem(err)})", path=str(target)) from None
        raise
    return target
