"""Streaming safetensors access without loading whole files: header parsing, row-range reads
with positional I/O, and a writer that emits the header first and then each tensor in order.

The format (8-byte little-endian header length, JSON header, contiguous data; safetensors
README) is simple enough that reading and writing raw bytes keeps BF16 exact without torch.
"""

from __future__ import annotations

import json
import math
import os
import struct
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


class RowReader:
    """Row ranges of a tensor as read-only NumPy views of a memory map of its bytes: no copies,
    and the pages come from the page cache. The mapping (and the RSS its touched pages count
    for) goes away when the reader and every view of it are gone."""

    def __init__(self, entry: TensorEntry):
        self.entry = entry
        if entry.nbytes == 0:
            self._mm = np.zeros(entry.shape, NUMPY_VIEW[entry.dtype])
        else:
            self._mm = np.memmap(entry.file, dtype=NUMPY_VIEW[entry.dtype], mode="r",
                                 offset=entry.offset, shape=entry.shape)

    def rows(self, start: int, stop: int) -> np.ndarray:
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
