"""Resolve a checkpoint argument (folder, .safetensors file, hub id, demo:NAME) to its configs and headers.

Only JSON files and safetensors headers are read; tensor data never is.
"""

from __future__ import annotations

import errno
import json
import os
import re
from dataclasses import dataclass, field
from typing import Literal, overload

from advisor.checkpoint.index_summary import IndexSummary, pairs_fingerprint, summarize_index
from advisor.checkpoint.safetensors_header import read_header_columns
from advisor.checkpoint.shards import ShardGrouper, ShardTensors, header_columns
from advisor.checkpoint.tensors import ModuleTensors
from advisor.errors import BadInput

_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+(?:@[\w./-]+)?$")
INDEX_NAME = "model.safetensors.index.json"


@dataclass
class CheckpointFiles:
    source: str
    config: dict | None = None
    hf_quant_config: dict | None = None
    quantize_config: dict | None = None
    index: dict | None = None
    index_path: str | None = None
    headers: list[ShardTensors] = field(default_factory=list)
    local: bool = True                    # headers are local files (tiny scalars may be read for doctor checks)
    notes: list[tuple[str, str, str]] = field(default_factory=list)   # (code, severity, message)
    gguf: list[tuple[str, int]] = field(default_factory=list)   # (file name, bytes) of GGUF weights in the folder
    # the index names every header's tensors, each in its own shard, and no others: load() checked it while
    # reading the headers, so the doctor's index check has nothing to look for (False: not known, look)
    index_matches: bool = False
    grouped: ModuleTensors | None = None     # the headers' tensors by module (shards.group_shards)


def load(source: str) -> CheckpointFiles:
    if source.startswith("demo:"):
        from advisor.checkpoint.demo import demo_path

        return _load_local(str(demo_path(source[5:])), display=source)
    if os.path.lexists(source) or source.startswith((".", "/", "~")) or source.endswith(".safetensors"):
        return _load_local(os.path.expanduser(source), display=source)
    if _HUB_ID.match(source):
        try:
            return _load_hub(source)
        except BadInput as err:
            problem = str(err)[len(f"{err.path}: "):] if err.path else str(err)
            raise BadInput(f"no local folder of that name, and as a hub id: {problem}", path=err.path) from None
    raise BadInput("no such file or folder (and not a hub id org/name[@revision])", path=source)


# ------------------------------------------------------------------ local

def _stat(path: str):
    try:
        return os.stat(path)
    except OSError as err:
        raise BadInput(_os_problem(err), path=path) from None


def _os_problem(err: OSError) -> str:
    if err.errno == errno.ELOOP:
        return "symlink loop"
    if err.errno == errno.ENOENT:
        return "no such file or folder"
    if err.errno in (errno.EACCES, errno.EPERM):
        return "permission denied"
    return f"cannot read ({err.strerror or err})"


@overload
def read_json(path: str, *, required: Literal[True]) -> dict: ...
@overload
def read_json(path: str, *, required: Literal[False]) -> dict | None: ...
def read_json(path: str, *, required: bool) -> dict | None:
    if not os.path.lexists(path):
        if required:
            raise BadInput("missing (every checkpoint needs one)", path=path)
        return None
    from advisor.textfile import JSON_LIMIT, read_bytes

    data = read_bytes(path, limit_bytes=JSON_LIMIT, what="JSON file")   # a FIFO or /dev/zero: one line
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise BadInput(f"not UTF-8 (byte {err.start})", path=path) from None
    del data                    # an index is as large as all the headers: not kept twice while parsed
    try:
        obj = json.loads(text)
    except (ValueError, RecursionError) as err:
        raise BadInput(f"invalid JSON ({str(err).splitlines()[0][:100]})", path=path) from None
    if not isinstance(obj, dict):
        raise BadInput(f"expected a JSON object, found {type(obj).__name__}", path=path)
    return obj


def _load_local(path: str, display: str) -> CheckpointFiles:
    st = _stat(path)
    import stat as _st

    if _st.S_ISREG(st.st_mode):
        if not path.endswith(".safetensors"):
            raise BadInput("expected a folder or a .safetensors file", path=path)
        folder = os.path.dirname(os.path.abspath(path))
        files = CheckpointFiles(source=display)
        cfg_path = os.path.join(folder, "config.json")
        if os.path.exists(cfg_path):
            files.config = read_json(cfg_path, required=False)
            files.hf_quant_config = read_json(os.path.join(folder, "hf_quant_config.json"), required=False)
            files.quantize_config = read_json(os.path.join(folder, "quantize_config.json"), required=False)
        grouper = ShardGrouper(folder=path, index=False)
        files.headers = [grouper.add(read_header_columns(path), os.path.basename(path))]
        files.grouped = grouper.finish()
        return files
    if not _st.S_ISDIR(st.st_mode):
        raise BadInput("not a regular file or folder", path=path)
    files = CheckpointFiles(source=display)
    try:
        listing = sorted(os.listdir(path))
    except OSError as err:
        raise BadInput(_os_problem(err), path=path) from None
    gguf = [n for n in listing if n.endswith(".gguf") and os.path.isfile(os.path.join(path, n))]
    if gguf:
        # a GGUF folder: the weights are sized from the files themselves (config.json, when present, for the rest)
        files.gguf = [(n, os.path.getsize(os.path.join(path, n))) for n in gguf]
    if gguf and not os.path.lexists(os.path.join(path, "config.json")):
        return files
    files.config = read_json(os.path.join(path, "config.json"), required=True)
    files.hf_quant_config = read_json(os.path.join(path, "hf_quant_config.json"), required=False)
    files.quantize_config = read_json(os.path.join(path, "quantize_config.json"), required=False)
    try:
        names = sorted(os.listdir(path))
    except OSError as err:
        raise BadInput(_os_problem(err), path=path) from None
    index_names = [n for n in names if n.endswith(".safetensors.index.json")]
    shards: list[str]
    summary: IndexSummary | None = None
    if index_names:
        ipath = os.path.join(path, INDEX_NAME if INDEX_NAME in index_names else index_names[0])
        summary = _index_summary(ipath)
        files.index_path = ipath
        shards = sorted(summary.shards)
        present = [s for s in shards if os.path.lexists(os.path.join(path, s))]
        if not present:
            files.notes.append(("no-weights", "info",
                                "no weight shards present (config-only folder): sizes are computed from the config"))
            return files
        missing = [s for s in shards if s not in present]
        if missing:
            more = f" and {len(missing) - 1} more" if len(missing) > 1 else ""
            raise BadInput(f"shard {missing[0]!r}{more} listed in the index is missing",
                           path=os.path.join(path, missing[0]))
    else:
        shards = [n for n in names if n.endswith(".safetensors")]
        if not shards and files.gguf:
            return files
        if not shards:
            other = [n for n in names if n.endswith((".bin", ".pt", ".gguf", ".pth"))]
            msg = ("no .safetensors weights (only " + ", ".join(other[:3]) + "): sizes are computed from the config"
                   if other else "no weight files present (config-only folder): sizes are computed from the config")
            files.notes.append(("no-weights", "info", msg))
            return files
    # Each shard is grouped by module as it is read (shards.py), its names kept only while it is: the index
    # is checked by a fingerprint of its (name, shard) pairs against the headers' (index_summary.py), and a
    # name in two shards is refused while grouping. Both kept every name of the checkpoint as a string before (~5x the
    # header bytes at 100k tensors; benchmarks/inspect_speed.py).
    fingerprint = count = 0
    grouper = ShardGrouper(folder=path, index=summary is not None)
    for s in shards:
        c = read_header_columns(os.path.join(path, s))
        if summary is not None:
            fingerprint += pairs_fingerprint(c.names, s)
            count += len(c.names)
        files.headers.append(grouper.add(c, s))
        del c
    files.grouped = grouper.finish()
    if summary is not None and files.index_path:
        # the same (name, shard) pairs as the headers (the names are unique: grouping refused a repeat), so
        # the index names every header's tensors, each in its own shard, and no others
        files.index_matches = (fingerprint, count) == (summary.fingerprint, summary.count)
        # the doctor reads the metadata; the weight map only to word a mismatch
        files.index = {"metadata": summary.metadata} if files.index_matches else _read_index(files.index_path)[0]
    return files


def _index_summary(ipath: str) -> IndexSummary:
    """The index's shards and the fingerprint of its pairs: read in pieces where it is in a plain form, else
    through json.loads with today's checks and messages."""
    summary = summarize_index(ipath)
    if summary is not None:
        for v in summary.shards:
            _check_shard_name(v, ipath)
        return summary
    index, values = _read_index(ipath)
    wm = index["weight_map"]
    return IndexSummary(frozenset(values), len(wm), sum(map(hash, wm.items())), index.get("metadata"))


def _read_index(ipath: str) -> tuple[dict, set[str]]:
    """The index and its distinct shard names, checked: a weight map of names to relative file names."""
    index = read_json(ipath, required=True)
    wm = index.get("weight_map")
    # JSON object keys are always strings: only the values' types are checked, on the distinct values
    # (a list or object value is unhashable: set() raises TypeError)
    try:
        values = set(wm.values()) if isinstance(wm, dict) else None
    except TypeError:
        values = None
    if values is None or not {str} >= set(map(type, values)):
        raise BadInput("weight_map must map tensor names to shard file names", path=ipath)
    for v in values:
        _check_shard_name(v, ipath)
    return index, values


def _check_shard_name(v: str, ipath: str) -> None:
    if os.path.isabs(v) or ".." in v.split("/"):
        raise BadInput(f"shard name {v!r} points outside the checkpoint folder", path=ipath)


# ------------------------------------------------------------------ hub

def _load_hub(source: str) -> CheckpointFiles:
    from advisor.checkpoint import hub

    repo_id, _, revision = source.partition("@")
    snap = hub.fetch(repo_id, revision or None)
    files = CheckpointFiles(source=source, local=False)
    files.config = snap.configs.get("config.json")
    files.hf_quant_config = snap.configs.get("hf_quant_config.json")
    files.quantize_config = snap.configs.get("quantize_config.json")
    grouper = ShardGrouper(folder=source, index=False, refuse_duplicates=False)
    files.headers = [grouper.add(header_columns(h), h.path, local=False) for h in snap.headers]
    files.grouped = grouper.finish()
    files.index = snap.index
    if snap.note:
        files.notes.append(("no-weights", "info", snap.note + ": sizes are computed from the config"))
    elif not snap.headers:
        files.notes.append(("no-weights", "info", "no safetensors files in the repository: sizes from the config"))
    return files
