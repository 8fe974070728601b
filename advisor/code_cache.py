"""The methods dataclasses generate, compiled once and kept between runs (as __pycache__ keeps modules).

Python's dataclasses write each class's ``__init__``, ``__repr__``, ``__eq__``, ``__hash__`` and (frozen)
``__setattr__``/``__delattr__`` as source text and compile it with ``exec()`` when the class statement runs:
on ``plan``'s import path 170 classes, about 900 compiles, 0.07-0.1 s of a 0.3 s cold start on a 2-core
machine (issue 23). :func:`install` gives the ``dataclasses`` module an ``exec`` that runs the code object
compiled from the same text in an earlier run. It is the same ``compile()`` call ``exec`` makes (same
text, filename ``<string>``, no inherited ``__future__`` flags), so the classes are the same; only the
compile is skipped.

The store is a folder in the user cache dir (advisor.profile_cache's) per interpreter version, one file
per module that defines the classes (text -> marshalled code, unmarshalled only for the texts asked for),
so a command reads the code of the classes it builds, not that of every command and test run before (one
file of 4.7 k texts, 8.7 MB, took 16 ms to read on a busy 2-core box; `plan` needs 0.7 k). New texts are
added when the process exits (merged with what other processes stored meanwhile; past ``_MAX_ENTRIES``
only this run's are kept). A damaged, foreign or unreadable file costs speed only.
NVFP4_ADVISOR_NO_CACHE=1 turns it off.
"""

from __future__ import annotations

import builtins
import marshal
import os
import sys
from typing import Any

_MAX_ENTRIES = 2000          # per module; past it the next save keeps this run's texts only

_known: dict[str, dict[str, bytes]] = {}   # module -> text -> marshalled code, as read from its file
_used: dict[str, dict[str, bytes]] = {}    # module -> texts this process ran (kept on a save past _MAX_ENTRIES)
_new: set[str] = set()                     # modules that compiled something their file did not have
_installed = False
_store: str | None = None                  # the store's folder, fixed when first read (the save goes there too)


def install() -> None:
    """Route the dataclasses module's exec() through the store (idempotent)."""
    global _installed
    if _installed or os.environ.get("NVFP4_ADVISOR_NO_CACHE"):
        return
    import dataclasses

    if "exec" in vars(dataclasses):        # someone else's hook: leave it alone
        return
    dataclasses.exec = _exec               # type: ignore[attr-defined]  # module global before the builtin
    _installed = True
    import atexit

    atexit.register(_save)


def _exec(source: Any, globals: Any = None, locals: Any = None) -> None:
    if type(source) is not str:
        builtins.exec(source, globals, locals)
        return
    # dataclasses passes the defining module's namespace as globals
    module = globals.get("__name__") if isinstance(globals, dict) else None
    if not isinstance(module, str) or not all(part.isidentifier() for part in module.split(".")):
        module = "_"                       # no module (or a name unfit for a file name): a shared file
    builtins.exec(_code(source, module), globals, locals)


def _code(text: str, module: str) -> Any:
    known = _known.get(module)
    if known is None:
        known = _known[module] = _load(module)
    used = _used.setdefault(module, {})
    blob = known.get(text)
    if blob is not None:
        try:
            code = marshal.loads(blob)
            used[text] = blob
            return code
        except (ValueError, EOFError, TypeError):
            pass
    # exec(text) compiles this way: "<string>", and a string exec'd from dataclasses.py inherits no
    # __future__ flags (dont_inherit: not this module's `annotations`)
    code = compile(text, "<string>", "exec", dont_inherit=True)
    used[text] = marshal.dumps(code)
    _new.add(module)
    return code


def _path(module: str) -> str:
    global _store
    if _store is None:
        from advisor.profile_cache import cache_dir

        _store = os.path.join(cache_dir().parent, "code", f"dataclasses-{sys.implementation.cache_tag}")
    return os.path.join(_store, f"{module}.marshal")


def _load(module: str) -> dict[str, bytes]:
    try:
        with open(_path(module), "rb") as fh:
            version, table = marshal.load(fh)
    except Exception:                      # absent, damaged, another format: compile as usual
        return {}
    if version != sys.version or not isinstance(table, dict):
        return {}
    return table


def _save() -> None:
    if not _new:
        return
    from pathlib import Path

    from advisor.profile_cache import write_atomic

    for module in sorted(_new):
        used = _used[module]
        table = {**_load(module), **used}  # what others stored since we read, and ours
        if len(table) > _MAX_ENTRIES:
            table = dict(used)
        try:
            blob = marshal.dumps((sys.version, table))
        except ValueError:
            continue
        write_atomic(Path(_path(module)), blob)
    if _store is not None:
        try:                               # the one-file store of earlier versions (same name + .marshal):
            os.unlink(_store + ".marshal")     # nothing reads it any more; it held every command's code
        except OSError:
            pass
