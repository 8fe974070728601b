"""A checkpoint's shards as `inspect` keeps them, and their tensors grouped by module.

A 100k-tensor checkpoint as a dict of TensorEntry per shard plus its index as a dict costs ~5x the header
bytes (benchmarks/inspect_speed.py, issue 23: <= 3x). So a shard keeps its header's facts only, and its
tensors go straight into modules as it is read: module name -> {suffix: entry}, an entry laid out as a
TensorEntry with the suffix in place of the name (a plain tuple; ModuleTensor names its fields). A name that
is not ``module.suffix`` for a suffix of tensors._ONE_PART (A_log, gpt-oss *_blocks, a bare 3-D parameter)
is split by tensors.split_name as before. Full names are rebuilt only where a rare path needs them (odd
names, the doctor's index mismatch report).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from itertools import compress, repeat
from operator import itemgetter, setitem

from advisor.checkpoint.safetensors_header import HeaderColumns, SafetensorsHeader, read_header
from advisor.checkpoint.tensors import _ONE_PART, ModuleTensors, split_name
from advisor.errors import BadInput


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
    # per tensor, header order, until grouped (ShardGrouper): module name (the full name where suffix is None),
    # suffix, entry
    columns: tuple[list, list, list] | None = None
    names: list[str] | None = None  # kept for a header that is not a local file (cannot be read again)

    def tensor_names(self) -> list[str]:
        """Every tensor name in header order (read again from the file: only rare paths ask)."""
        if self.names is not None:
            return self.names
        return list(read_header(self.path).tensors)


_FIRST, _THIRD = itemgetter(0), itemgetter(2)
_KV = frozenset(("k_scale", "v_scale"))


class ShardGrouper:
    """Groups the tensors of a checkpoint's shards by module, a shard at a time as they are read, in header
    order (what tensors.group_tensors did over whole headers), and refuses a tensor name in two shards as
    load() always did: counting both copies would double every size (the refusal names ``folder``;
    ``index``: it has an index). A hub snapshot's repeats are kept apart instead (``refuse_duplicates``
    False), as they always were.

    A shard is grouped as soon as it is read, so its columns live only while it is: until a name that is not
    "module.suffix" (odd: A_log, *_blocks, a bare parameter) turns up. tensors.split_name splits such a name
    against every name of the checkpoint, later shards' too, so from that shard on they are kept as columns
    and grouped by finish(), when every name is known (the grouped ones rebuilt from the modules)."""

    def __init__(self, *, folder: str, index: bool, refuse_duplicates: bool = True):
        self.folder, self.index, self.refuse = folder, index, refuse_duplicates
        self.mods: dict[str, dict[str, tuple]] = {}
        self.paths: list[str] = []
        self.split: dict[str, dict[str, str]] = {}
        # the full name of each (module, key) whose name is not f"{module}.{key}" (odd names, renamed keys), and
        # the shard each odd name was seen in: a name in two shards is found by either
        self.renamed: dict[tuple[str, str], str] = {}
        self.odd_seen: dict[str, str] = {}
        self.shard_names: dict[str, str] = {}       # path -> the shard's name in messages
        self.pending: list[ShardTensors] | None = None

    def add(self, c: HeaderColumns, shard: str, *, local: bool = True) -> ShardTensors:
        """The shard of validated header columns ``c``; its tensors grouped now, or by finish() (see the class)."""
        names = c.names
        parts = list(map(str.rpartition, names, repeat(".")))
        modules = list(map(_FIRST, parts))
        lasts = list(map(_THIRD, parts))
        del parts
        suffixes = list(map(_ONE_PART.get, lasts))
        # an entry is a plain tuple laid out as a TensorEntry, its suffix first (ModuleTensor: one with names)
        entries = list(zip(suffixes, c.dtypes, c.shapes, c.begins, c.ends))
        # k_scale and v_scale are suffixes (_ONE_PART): the suffixes' strings are the module's own, hashed once
        kv = [] if _KV.isdisjoint(suffixes) else [n for n, last in zip(names, lasts) if last in _KV and n != last]
        data = c.file_size - 8 - c.header_size if local else sum(map(_nbytes, entries))
        h = ShardTensors(c.path, shard, c.header_size, c.file_size, c.metadata, len(names), data, kv, local,
                         None, None if local else list(names))
        self.shard_names.setdefault(c.path, shard)
        odd = not all(suffixes) or not all(modules)        # a None suffix or an empty module: truth in C
        if odd:                                     # a name not "module.suffix": kept whole, split when grouped
            for i, (m, sfx) in enumerate(zip(modules, suffixes)):
                if sfx is None or not m:
                    modules[i], suffixes[i] = names[i], None
        if odd or self.pending is not None:
            pool: dict[str, str] = {}
            h.columns = (list(map(pool.setdefault, modules, modules)), suffixes, entries)   # a string per module
            self.pending = [*(self.pending or ()), h]
        else:
            self._group(h, modules, suffixes, entries, None)
        return h

    def finish(self) -> ModuleTensors:
        if self.pending:
            columns = [h.columns for h in self.pending if h.columns is not None]
            names = {self.renamed.get((m, k)) or f"{m}.{k}" for m, t in self.mods.items() for k in t}
            names.update(m if sfx is None else f"{m}.{sfx}" for modules, suffixes, _ in columns
                         for m, sfx in zip(modules, suffixes))
            for h, (modules, suffixes, entries) in zip(self.pending, columns):
                self._group(h, modules, suffixes, entries, names)
                h.columns = None
            self.pending = None
        return ModuleTensors(self.mods, self.paths, self.split)

    def _group(self, h: ShardTensors, modules: list, suffixes: list, entries: list, names: set | None) -> None:
        if names is None:
            # Every name is "module.suffix": each module's dict is filled in C (a defaultdict, setitem mapped over
            # the columns), in header order as the loop below fills it, where no (module, suffix) is given twice
            # in the shard (the sum; unique names make it so, else the loop). The tensors of modules begun in an
            # earlier shard go through the loop, in header order (renamed keys, the duplicate refusal); it begins
            # no module, so the new ones are added after it in the order the loop adds them. At 100k tensors
            # ~17 ms instead of ~19 (CPU in process): each module string is still hashed once
            here: defaultdict[str, dict] = defaultdict(dict)
            any(map(setitem, map(here.__getitem__, modules), suffixes, entries))
            if sum(map(len, here.values())) == len(modules):
                earlier = self.mods.keys() & here.keys()
                if earlier:
                    for module in earlier:
                        del here[module]
                    keep = list(map(earlier.__contains__, modules))
                    self._group_loop(h, list(compress(modules, keep)), list(compress(suffixes, keep)),
                                     list(compress(entries, keep)), None)
                self.mods.update(here)
                self.paths.extend(repeat(h.path, len(here)))
                return
        self._group_loop(h, modules, suffixes, entries, names)

    def _group_loop(self, h: ShardTensors, modules: list, suffixes: list, entries: list, names: set | None) -> None:
        mods, paths, split, renamed, odd_seen = self.mods, self.paths, self.split, self.renamed, self.odd_seen
        get = mods.get
        path = h.path
        here: dict[str, dict] = {}          # the modules begun in this shard
        here_get = here.get
        for module, one, e in zip(modules, suffixes, entries):
            if one is not None:
                t = here_get(module)
                if t is not None and one not in t:      # the common case
                    t[one] = e
                    continue
                name, suffix = None, one
            else:
                assert names is not None        # a shard with odd names is grouped by finish(), knowing every name
                name = module
                if name in odd_seen and self.refuse:
                    self._refuse(name, odd_seen[name], h.shard)
                odd_seen[name] = h.shard
                module, suffix = split_name(name, names, len(e[2]))
                t = here_get(module)
            full = name if name is not None else f"{module}.{suffix}"
            if t is None:
                t = get(module)
                if t is None:
                    t = mods[module] = here[module] = {}
                    paths.append(path)
                else:                               # a module begun in an earlier shard
                    while suffix in t:
                        # a fast name under any of its keys here is this very name (odd names: odd_seen)
                        at = renamed.get((module, suffix)) or f"{module}.{suffix}"
                        if name is None and self.refuse and at == full:
                            first = split.get(module, {}).get(suffix) or paths[list(mods).index(module)]
                            self._refuse(full, self.shard_names.get(first, first), h.shard)
                        suffix = suffix + "+"
                    if full != f"{module}.{suffix}":
                        renamed[(module, suffix)] = full
                    t[suffix] = e if e[0] == suffix else (suffix, *e[1:])
                    split.setdefault(module, {})[suffix] = path
                    continue
            while suffix in t:               # a second free parameter of the same module (A_log, dt_bias)
                suffix = suffix + "+"
            if full != f"{module}.{suffix}":
                renamed[(module, suffix)] = full
            t[suffix] = e if e[0] == suffix else (suffix, *e[1:])

    def _refuse(self, name: str, first: str, second: str) -> None:
        # two copies of the weights in one folder (e.g. a re-saved file next to the original)
        hint = ("the index lists both files" if self.index else
                "two copies of the weights? inspect one file, or add a model.safetensors.index.json")
        raise BadInput(f"tensor {name!r} is in both {first} and {second}: {hint}", path=self.folder)


def _nbytes(e: tuple) -> int:
    return e[4] - e[3]


def header_columns(h: SafetensorsHeader) -> HeaderColumns:
    """The columns of a parsed header (a hub header)."""
    entries = h.tensors.values()
    return HeaderColumns(h.path, h.header_size, h.file_size, h.metadata, list(h.tensors),
                         [e.dtype for e in entries], [e.shape for e in entries],
                         [e.begin for e in entries], [e.end for e in entries])
