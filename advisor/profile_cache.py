"""Profiles read on every cold start (plan, explain, the TUI), kept in the user cache dir.

Two kinds of entry, both keyed by a hash of what they were made from, so an edited file is never
served from the cache and an unwritable or unreadable cache dir costs speed only:

- ``parsed``: any YAML profile's parsed data, as JSON (the vLLM rule file parses in ~0.1 s with
  libyaml on a busy machine, its JSON in ~2 ms). The callers validate it as they validate a fresh
  parse, so a damaged entry cannot pass for a good profile. Only data JSON carries exactly is
  stored (a YAML date or an integer mapping key would come back changed: parsed every time).
- ``validated``: an engine rule file's validated object (pickle of advisor.kernel_path.rule_records,
  no pydantic), keyed by the file's name and text and the source of the modules that define the schema.

NVFP4_ADVISOR_NO_CACHE=1 turns both off.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any, Callable

FORMAT = "1"        # bump when what is stored changes


def cache_dir() -> Path:
    return Path(user_cache_dir()) / "parsed"


APP = "nvfp4-advisor"


def user_cache_dir() -> str:
    """``platformdirs.user_cache_dir("nvfp4-advisor")``. On Linux with an absolute ``$XDG_CACHE_HOME``, or with
    none (unset or empty) and an absolute ``$HOME``, every platformdirs 4.x answers the same (its Unix class:
    ``$XDG_CACHE_HOME/APP``, else ``~/.cache/APP``; Android, ``use_site_for_root`` and ``ensure_exists`` are
    off there): that answer is made here without importing platformdirs (3.5 ms of every command's start, with
    the tempfile, random and shutil it brings). Any other case asks platformdirs."""
    if sys.platform == "linux" and not hasattr(sys, "getandroidapilevel") and not (
            os.environ.get("ANDROID_DATA") == "/data" and os.environ.get("ANDROID_ROOT") == "/system"):
        xdg = os.environ.get("XDG_CACHE_HOME", "")
        if xdg.startswith("/"):
            return os.path.join(xdg, APP)
        if not xdg and os.environ.get("HOME", "").startswith("/"):
            return os.path.join(os.path.expanduser("~/.cache"), APP)
    import platformdirs

    return platformdirs.user_cache_dir(APP)


def _entry(text: str) -> Path:
    import hashlib

    key = hashlib.sha256(f"{FORMAT}\0{text}".encode("utf-8", "surrogatepass")).hexdigest()[:32]
    return cache_dir() / f"{key}.json"


def parsed(text: str, parse: Callable[[], Any]) -> Any:
    """``parse()`` of TEXT, from the cache when this exact text was parsed before."""
    if os.environ.get("NVFP4_ADVISOR_NO_CACHE"):
        return parse()
    import json

    entry = _entry(text)
    try:
        return json.loads(entry.read_bytes())
    except (OSError, ValueError):
        pass                                   # absent or damaged: parse, then store
    data = parse()
    _store(entry, data)
    return data


def _store(entry: Path, data: Any) -> None:
    import json

    try:
        blob = json.dumps(data, ensure_ascii=False, allow_nan=False)
        if json.loads(blob) != data:           # not carried exactly (int keys, tuples): never cached
            return
    except (TypeError, ValueError):            # dates, sets, NaN: not JSON
        return
    write_atomic(entry, blob.encode("utf-8"))


# ---------------------------------------------------------------- validated objects
# A rule file validated once is kept as its validated object (pickle): a later start skips the YAML, the
# validation and, with the models' defer_build, pydantic's schema building (on a busy 2-core box: importing
# advisor.kernel_path.rules 0.6 -> 0.2 s, loading the vLLM rules 0.37 -> 0.03 s); kept as plain records
# (advisor.kernel_path.rule_records), a hit imports neither pydantic nor the schema.
# The key holds the file's name and text and the source of every module that defines or constrains the
# schema, so an edited file or an edited model validates again. The entry is as trusted as the bytecode
# in __pycache__: both live where only this user writes.


def validated(path: str, text: str, build: Callable[[], Any], schema_modules: tuple[str, ...]) -> Any:
    """``build()`` (parse and validate TEXT read from PATH), from the cache when this name, text and
    schema were validated before."""
    if os.environ.get("NVFP4_ADVISOR_NO_CACHE"):
        return build()
    import pickle

    entry = _validated_entry(path, text, schema_modules)
    if entry is not None:
        try:
            return pickle.loads(entry.read_bytes())
        except Exception:                      # absent, damaged, or from models since renamed: validate
            pass
    obj = build()
    if entry is not None:
        try:
            write_atomic(entry, pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL))
        except (pickle.PicklingError, TypeError, AttributeError):
            pass
    return obj


def _validated_entry(path: str, text: str, schema_modules: tuple[str, ...]) -> Path | None:
    import hashlib

    h = hashlib.sha256(f"{FORMAT}\0{sys.version}\0{Path(path).name}\0{text}".encode("utf-8", "surrogatepass"))
    for name in schema_modules:
        source = _source_file(name)
        if source is None:
            return None                        # cannot tell the schema apart: no cache
        # a package (pydantic) by its __init__ and its version.py, where one is
        files = [source] + ([source.with_name("version.py")] if source.name == "__init__.py" else [])
        try:
            for f in files:
                if f is source or f.is_file():
                    h.update(f.read_bytes())
        except OSError:
            return None
    return cache_dir().parent / "validated" / f"{Path(path).stem}-{h.hexdigest()[:32]}.pickle"


def _source_file(name: str) -> Path | None:
    """The file module NAME runs from, without importing it when it is not imported yet (a cache hit
    must not import pydantic or the schema just to compute its key)."""
    mod = sys.modules.get(name)
    if mod is not None:
        source = getattr(mod, "__file__", None)
    else:
        import importlib.util

        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            return None
        source = spec.origin if spec is not None and spec.has_location else None
    return Path(source) if isinstance(source, str) else None


def write_atomic(entry: Path, blob: bytes) -> None:
    """BLOB written to ENTRY whole or not at all (also advisor.code_cache's store)."""
    import tempfile

    try:
        entry.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=entry.parent, suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(blob)
            os.replace(tmp, entry)             # readers see the old entry or the whole new one
        except BaseException:
            os.unlink(tmp)
            raise
    except OSError:
        pass                                   # read-only or full cache dir: only speed is lost
