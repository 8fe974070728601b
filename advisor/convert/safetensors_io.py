"""Streaming safetensors access without loading whole files: header parsing, row-range reads
with positional I/O, a writer that emits the header first and then each tensor in order, and one
that takes positional writes in any order from many threads.

The format (8-byte little-endian header length, JSON header, contiguous data; safetensors
README) is simple enough that reading and writing raw bytes keeps BF16 exact without torch.
"""

from __future__ import annotations

import json
import math
import mmap
import os
import struct
import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from advisor.checkpoint.safetensors_header import DTYPE_BITS
from advisor.errors import BadInput

# Bytes per element of every whole-byte dtype (the strict header reader's table is the one truth).
DTYPE_SIZES = {k: bits // 8 for k, bits in DTYPE_BITS.items() if bits % 8 == 0}
NUMPY_VIEW = {  # dtype -> numpy dtype of the raw bytes (float formats numpy lacks stay as bits)
    "BOOL": np.uint8, "U8": np.uint8, "I8": np.int8, "F8_E4M3": np.uint8, "F8_E5M2": np.uint8,
    "F8_E8M0": np.uint8, "I16": np.int16, "U16": np.uint16, "F16": np.uint16, "BF16": np.uint16,
    "I32": np.int32, "U32": np.uint32, "F32": np.float32, "I64": np.int64, "U64": np.uint64,
    "F64": np.float64,
}


@dataclass(frozen=True)
class TensorEntry:
    name: str
    dtype: str
    shape: tuple[int, ...]
    file: Path
    offset: int      # absolute byte offset of the data in the file
    nbytes: int

    @property
    def numel(self) -> int:
        return math.prod(self.shape)


def read_header(path: Path) -> tuple[dict[str, TensorEntry], dict[str, str]]:
    """Parse and validate one safetensors header. Raises BadInput naming the file.

    The validation is the inspector's strict reader (UTF-8, JSON, integer shapes and offsets,
    sizes matching dtype x shape, no overlaps or holes, data inside the file, regular files
    only), so a file that converts is one the safetensors library itself would load."""
    from advisor.checkpoint.safetensors_header import read_header as read_strict

    hdr = read_strict(str(path))
    base = 8 + hdr.header_size
    entries = {}
    for name, t in hdr.tensors.items():
        if t.dtype not in DTYPE_SIZES:
            raise BadInput(f"tensor {name} has unsupported dtype {t.dtype}", path=str(path))
        entries[name] = TensorEntry(name, t.dtype, t.shape, path, base + t.begin, t.nbytes)
    return entries, dict(hdr.metadata)


def read_bytes(entry: TensorEntry, start: int = 0, length: int | None = None) -> bytes:
    """Bytes [start, start+length) of a tensor's data (positional read, no mmap)."""
    length = entry.nbytes - start if length is None else length
    with open(entry.file, "rb") as f:
        data = os.pread(f.fileno(), length, entry.offset + start)
    if len(data) != length:
        raise BadInput(f"tensor {entry.name}: file ended early", path=str(entry.file))
    return data


def read_into(fd: int, entry: TensorEntry, start: int, out: np.ndarray) -> np.ndarray:
    """Fill `out` (a contiguous array) with the tensor's bytes from `start` on, by positional
    reads from `fd` (an open descriptor of entry.file; safe to share between threads)."""
    view = out.data.cast("B")
    got = 0
    while got < len(view):
        n = os.preadv(fd, [view[got:]], entry.offset + start + got)
        if n <= 0:
            raise BadInput(f"tensor {entry.name}: file ended early", path=str(entry.file))
        got += n
    return out


class MappedRows:
    """Rows a..b of a 2-D tensor as a read-only NumPy view of a memory map of just those bytes.

    Reading through the map costs the page cache lookups only (the kernel maps 16 pages per
    fault), where a positional read also copies every byte: on a busy VM that copy cost 10x
    the mapping. Use as a context manager; the map (and the resident memory it counts for) goes
    when it closes, so a worker holds one span's pages at a time."""

    def __init__(self, fd: int, entry: TensorEntry, a: int, b: int):
        k = math.prod(entry.shape[1:])
        item = DTYPE_SIZES[entry.dtype]
        start, length = entry.offset + a * k * item, (b - a) * k * item
        self._map = None
        if length == 0:
            self.rows = np.zeros((b - a, *entry.shape[1:]), NUMPY_VIEW[entry.dtype])
            return
        base = start - start % mmap.ALLOCATIONGRANULARITY
        self._map = mmap.mmap(fd, length + start - base, mmap.MAP_SHARED, mmap.PROT_READ, offset=base)
        self.rows = np.frombuffer(self._map, NUMPY_VIEW[entry.dtype], length // item, start - base) \
            .reshape(b - a, *entry.shape[1:])

    def __enter__(self) -> "MappedRows":
        return self

    def __exit__(self, *exc) -> None:
        del self.rows                # drop the view first: a map with a live view cannot close
        if self._map is not None:
            try:
                self._map.close()
            except BufferError:      # a view still refers to it: unmapped when that goes
                pass
            self._map = None


class RowReader:
    """Row ranges of a tensor as read-only NumPy views of a memory map of its bytes: no copies,
    and the pages come from the page cache. The mapping (and the RSS its touched pages count
    for) goes away when the reader and every view of it are gone."""

    def __init__(self, entry: TensorEntry):
        self.entry = entry
        self._mm: np.ndarray | None
        if entry.nbytes == 0:
            self._mm = np.zeros(entry.shape, NUMPY_VIEW[entry.dtype])
        else:
            self._mm = np.memmap(entry.file, dtype=NUMPY_VIEW[entry.dtype], mode="r",
                                 offset=entry.offset, shape=entry.shape)

    def rows(self, start: int, stop: int) -> np.ndarray:
        assert self._mm is not None, "rows() after close()"
        return self._mm[start:stop]

    def close(self) -> None:
        self._mm = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


@dataclass(frozen=True)
class OutSpec:
    name: str
    dtype: str
    shape: tuple[int, ...]

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * DTYPE_SIZES[self.dtype]


def order_for_file(specs: list[OutSpec]) -> list[OutSpec]:
    """The order the safetensors serializer uses: larger dtype alignment first, then by name."""
    return sorted(specs, key=lambda s: (-DTYPE_SIZES[s.dtype], s.name))


def header_bytes(specs: list[OutSpec], metadata: dict[str, str] | None = None) -> bytes:
    header: dict[str, object] = {}
    if metadata:
        header["__metadata__"] = metadata
    pos = 0
    for s in specs:
        header[s.name] = {"dtype": s.dtype, "shape": list(s.shape), "data_offsets": [pos, pos + s.nbytes]}
        pos += s.nbytes
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)           # the reference writer pads to a multiple of 8
    return struct.pack("<Q", len(raw)) + raw


class ShardWriter:
    """Writes one safetensors file: header up front, then tensors strictly in header order.

    Each tensor may arrive in pieces; the writer checks that every tensor gets exactly its size.
    """

    def __init__(self, path: Path, specs: list[OutSpec], metadata: dict[str, str] | None = None):
        self.path = path
        self.specs = specs
        self._f = open(path, "xb")
        self._f.write(header_bytes(specs, metadata))
        self._i = -1
        self._left = 0
        self._advance()

    def _advance(self) -> None:
        # move to the next tensor that still needs bytes (zero-size tensors need none)
        self._i += 1
        while self._i < len(self.specs) and self.specs[self._i].nbytes == 0:
            self._i += 1
        self._left = self.specs[self._i].nbytes if self._i < len(self.specs) else 0

    @property
    def expected(self) -> OutSpec | None:
        return self.specs[self._i] if self._i < len(self.specs) else None

    def write(self, name: str, data) -> None:
        spec = self.expected
        if spec is None or spec.name != name:
            raise RuntimeError(f"write order: got {name}, expected {spec.name if spec else 'nothing'}")
        mv = memoryview(data).cast("B")
        if len(mv) > self._left:
            raise RuntimeError(f"{name}: more bytes than its shape")
        self._f.write(mv)
        self._left -= len(mv)
        if self._left == 0:
            self._advance()

    def close(self) -> None:
        if self.expected is not None:
            raise RuntimeError(f"{self.path.name}: {self.expected.name} was not written")
        self._f.flush()
        os.fsync(self._f.fileno())
        self._f.close()

    def abort(self) -> None:
        self._f.close()


class ShardFile:
    """One safetensors file written by positional writes from any number of threads: the header
    first, then each tensor's bytes at their final offsets in any order. `close` checks that the
    writes tiled every tensor exactly (no hole, no overlap) before it syncs the file."""

    def __init__(self, path: Path, specs: list[OutSpec], metadata: dict[str, str] | None = None):
        self.path = path
        header = header_bytes(specs, metadata)
        self.offsets: dict[str, int] = {}
        self.sizes: dict[str, int] = {}
        pos = len(header)
        for s in specs:
            self.offsets[s.name] = pos
            self.sizes[s.name] = s.nbytes
            pos += s.nbytes
        self._written: dict[str, list[tuple[int, int]]] = {s.name: [] for s in specs}
        self._lock = threading.Lock()
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o644)
        try:
            self.write_at_file(0, header)
            os.ftruncate(self.fd, pos)
        except BaseException:
            os.close(self.fd)
            raise

    def write_at_file(self, pos: int, data) -> None:
        view = memoryview(data).cast("B")
        done = 0
        while done < len(view):
            done += os.pwrite(self.fd, view[done:], pos + done)

    def write(self, name: str, start: int, data) -> None:
        """Bytes of tensor `name` from byte `start` on."""
        n = memoryview(data).nbytes
        if start < 0 or start + n > self.sizes[name]:
            raise RuntimeError(f"{name}: write [{start}, {start + n}) outside its {self.sizes[name]} bytes")
        self.write_at_file(self.offsets[name] + start, data)
        self.note_written(name, start, start + n)

    def note_written(self, name: str, start: int, end: int) -> None:
        """Record bytes [start, end) of `name` as written (by `write`, or by the kernel)."""
        with self._lock:
            self._written[name].append((start, end))

    def close(self) -> None:
        for name, spans in self._written.items():
            end = 0
            for a, b in sorted(spans):
                if a != end:
                    raise RuntimeError(f"{self.path.name}: {name} bytes [{min(a, end)}, {max(a, end)}) "
                                       f"{'written twice' if a < end else 'not written'}")
                end = b
            if end != self.sizes[name]:
                raise RuntimeError(f"{self.path.name}: {name} bytes [{end}, {self.sizes[name]}) not written")
        os.fsync(self.fd)
        os.close(self.fd)
        self.fd = -1

    def abort(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
