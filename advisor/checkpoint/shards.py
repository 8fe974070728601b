"""A checkpoint's shards as `inspect` keeps them, and their tensors grouped by module.

A 100k-tensor checkpoint as a dict of TensorEntry per shard plus its index as a dict costs ~5x the header
bytes (benchmarks/inspect_speed.py, issue 23: <= 3x). So a shard keeps columns, not a name per tensor: each
tensor's module name (one string per module, shared) and known one-part suffix, and a ModuleTensor (suffix,
dtype, shape, begin, end). A name that is not ``module.suffix`` for a suffix of tensors._ONE_PART (A_log,
gpt-oss *_blocks, a bare 3-D parameter) keeps its full name and is split by tensors.split_name as before.
Full names are rebuilt only where a rare path needs them (odd names, the doctor's index mismatch report).
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import repeat
from operator import itemgetter
from typing import NamedTuple

from advisor.checkpoint.safetensors_header import HeaderColumns, SafetensorsHeader, read_header
from advisor.checkpoint.tensors import _ONE_PART, ModuleTensors, split_name
from advisor.errors import BadInput


class ModuleTensor(NamedTuple):
    """One tensor of a module: a TensorEntry whose first field is the suffix within the module, not the name."""

    suffix: str | None
    dtype: str
    shape: tuple[int, ...]
    begin: int
    end: int

    @property
    def nbytes(self) -> int:
        return self.end - self.begin

    @property
    def numel(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n


@dataclass(slots=True)
class ShardTensors:
    """One safetensors file of a checkpoint: its header's facts, and its tensors as columns until grouped."""

    path: str
    shard: str                      # the name the index uses for it (relative to the folder), or its path
    header_size: int
    file_size: int                  # -1: not a local file (hub)
    metadata: dict[str, str]
    count: int                      # tensors
    data_bytes: int                 # bytes the tensors span
    kv_names: list[str]             # tensors named *.k_scale / *.v_scale, in header order
    local: bool = True
    # per tensor, header order: module name (the full name where suffix is None), suffix, entry; None once grouped
    columns: tuple[list, list, list] | None = None
    names: list[str] | None = None  # kept for a header that is not a local file (cannot be read again)

    def tensor_names(self) -> list[str]:
        """Every tensor name in header order (read again from the file: only rare paths ask)."""
        if self.names is not None:
            return self.names
        return list(read_header(self.path).tensors)


_FIRST, _THIRD = itemgetter(0), itemgetter(2)
_new = tuple.__new__
_KV = frozenset(("k_scale", "v_scale"))


def shard_of_columns(c: HeaderColumns, shard: str, *, local: bool = True) -> ShardTensors:
    """A shard from its validated header columns. C-speed passes over the names; a loop only over odd names."""
    names = c.names
    parts = list(map(str.rpartition, names, repeat(".")))
    modules = list(map(_FIRST, parts))
    lasts = list(map(_THIRD, parts))
    del parts
    suffixes = list(map(_ONE_PART.get, lasts))
    if None in suffixes or "" in modules:           # a name not "module.suffix": kept whole, split when grouped
        for i, (m, s) in enumerate(zip(modules, suffixes)):
            if s is None or not m:
                modules[i], suffixes[i] = names[i], None
    pool: dict[str, str] = {}
    modules = list(map(pool.setdefault, modules, modules))      # one string per module, not one per tensor
    del pool
    entries = list(map(_new, repeat(ModuleTensor), zip(suffixes, c.dtypes, c.shapes, c.begins, c.ends)))
    kv = [] if _KV.isdisjoint(lasts) else [n for n, last in zip(names, lasts) if last in _KV and n != last]
    data = c.file_size - 8 - c.header_size if local else sum(map(ModuleTensor.nbytes.fget, entries))
    return ShardTensors(c.path, shard, c.header_size, c.file_size, c.metadata, len(names), data, kv, local,
                        (modules, suffixes, entries), None if local else list(names))


def shard_of_header(h: SafetensorsHeader, shard: str, *, local: bool) -> ShardTensors:
    """A shard from a parsed header (a hub header, or one the column reader handed to the full check)."""
    entries = h.tensors.values()
    return shard_of_columns(HeaderColumns(h.path, h.header_size, h.file_size, h.metadata, list(h.tensors),
                                          [e.dtype for e in entries], [e.shape for e in entries],
                                          [e.begin for e in entries], [e.end for e in entries]), shard, local=local)


def _all_names(shards: list[ShardTensors]) -> set[str]:
    return {m if s is None else f"{m}.{s}" for h in shards if h.columns is not None
            for m, s in zip(h.columns[0], h.columns[1])}


def group_shards(shards: list[ShardTensors], *, folder: str, index: bool,
                 refuse_duplicates: bool = True) -> ModuleTensors:
    """The shards' tensors -> modules keyed by module name, in header order (what tensors.group_tensors did
    over whole headers). A tensor name in two shards is refused as load() always did: counting both copies
    would double every size (the refusal names ``folder``; ``index``: it has an index). A hub snapshot's are
    kept apart instead (``refuse_duplicates`` False), as they always were. Drops the columns."""
    mods: dict[str, dict[str, ModuleTensor]] = {}
    paths: list[str] = []
    split: dict[str, dict[str, str]] = {}
    get = mods.get
    names: set[str] | None = None           # every tensor name: only an odd name asks
    # the full name of each (module, key) whose name is not f"{module}.{key}" (odd names, renamed keys), and the
    # shard each odd name was seen in: a name in two shards is found by either
    renamed: dict[tuple[str, str], str] = {}
    odd_seen: dict[str, str] = {}
    for h in shards:
        path = h.path
        modules, suffixes, entries = h.columns
        here: dict[str, dict[str, ModuleTensor]] = {}    # the modules begun in this shard
        here_get = here.get
        for module, one, e in zip(modules, suffixes, entries):
            if one is not None:
                t = here_get(module)
                if t is not None and one not in t:      # the common case
                    t[one] = e
                    continue
                name, suffix = None, one
            else:
                name = module
                if name in odd_seen and refuse_duplicates:
                    _refuse_duplicate(name, odd_seen[name], h.shard, folder, index)
                odd_seen[name] = h.shard
                if names is None:
                    names = _all_names(shards)
                module, suffix = split_name(name, names, len(e.shape))
                e = e._replace(suffix=suffix)
                t = here_get(module)
            if t is None:
                t = get(module)
                if t is None:
                    t = mods[module] = here[module] = {}
                    paths.append(path)
                else:                               # a module begun in an earlier shard
                    full = name if name is not None else f"{module}.{suffix}"
                    while suffix in t:
                        # a fast name under any of its keys here is this very name (odd names: odd_seen)
                        at = renamed.get((module, suffix)) or f"{module}.{suffix}"
                        if name is None and refuse_duplicates and at == full:
                            first = split.get(module, {}).get(suffix) or paths[list(mods).index(module)]
                            _refuse_duplicate(full, _shard_name(shards, first), h.shard, folder, index)
                        suffix = suffix + "+"
                    if full != f"{module}.{suffix}":
                        renamed[(module, suffix)] = full
                    t[suffix] = e if e.suffix == suffix else e._replace(suffix=suffix)
                    split.setdefault(module, {})[suffix] = path
                    continue
            full = name if name is not None else f"{module}.{suffix}"
            while suffix in t:               # a second free parameter of the same module (A_log, dt_bias)
                suffix = suffix + "+"
            if name is not None or suffix != one:
                renamed[(module, suffix)] = full
            t[suffix] = e if e.suffix == suffix else e._replace(suffix=suffix)
    for h in shards:
        h.columns = None
    return ModuleTensors(mods, paths, split)


def _shard_name(shards: list[ShardTensors], path: str) -> str:
    return next((h.shard for h in shards if h.path == path), path)


def _refuse_duplicate(name: str, first: str, second: str, folder: str, index: bool) -> None:
    # two copies of the weights in one folder (e.g. a re-saved file next to the original)
    hint = ("the index lists both files" if index else
            "two copies of the weights? inspect one file, or add a model.safetensors.index.json")
    raise BadInput(f"tensor {name!r} is in both {first} and {second}: {hint}", path=folder)
