"""A strict reader of safetensors headers: the JSON table of contents, never the tensor data.

Layout (huggingface/safetensors README, tensor.rs@24b0b28): 8-byte little-endian u64 N, then N
bytes of UTF-8 JSON ``{name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__": {...}}``,
then the data buffer. Offsets are relative to the buffer. We check what the official reader
checks (header size limit, UTF-8, JSON, offsets inside the buffer, sizes matching dtype x shape,
no overlaps) and report any violation as :class:`BadInput` naming the file.
"""

from __future__ import annotations

import json
import os
import stat
import struct
from dataclasses import dataclass
from typing import BinaryIO

from advisor.errors import BadInput

MAX_HEADER_SIZE = 100_000_000  # safetensors tensor.rs:10 MAX_HEADER_SIZE

# Bits per element of every dtype string the format defines (tensor.rs:811-891).
DTYPE_BITS: dict[str, int] = {
    "BOOL": 8, "F4": 4, "F6_E2M3": 6, "F6_E3M2": 6,
    "U8": 8, "I8": 8, "F8_E5M2": 8, "F8_E4M3": 8, "F8_E8M0": 8, "F8_E4M3FNUZ": 8, "F8_E5M2FNUZ": 8,
    "I16": 16, "U16": 16, "F16": 16, "BF16": 16,
    "I32": 32, "U32": 32, "F32": 32,
    "C64": 64, "F64": 64, "I64": 64, "U64": 64,
}


@dataclass(frozen=True)
class TensorEntry:
    name: str
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


@dataclass(frozen=True)
class SafetensorsHeader:
    path: str
    tensors: dict[str, TensorEntry]
    metadata: dict[str, str]
    header_size: int
    file_size: int


def read_header(path: str) -> SafetensorsHeader:
    """Read and validate the header of a local .safetensors file (reads 8 + N bytes only)."""
    try:
        # a FIFO or device would block open() or read() forever: only regular files are opened
        mode = os.stat(path).st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError
        if not stat.S_ISREG(mode):
            raise BadInput("not a regular file (FIFO, socket or device)", path=path)
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            return parse_header(f, size, path)
    except IsADirectoryError:
        raise BadInput("is a directory, expected a .safetensors file", path=path) from None
    except PermissionError:
        raise BadInput("cannot read file (permission denied)", path=path) from None
    except FileNotFoundError:
        raise BadInput("file not found", path=path) from None
    except OSError as err:
        raise BadInput(f"cannot read file ({err.strerror or err})", path=path) from None


def parse_header(f: BinaryIO, file_size: int, path: str) -> SafetensorsHeader:
    head = f.read(8)
    if len(head) < 8:
        raise BadInput(f"not a safetensors file (only {len(head)} bytes, need an 8-byte header length)", path=path)
    (n,) = struct.unpack("<Q", head)
    if n > MAX_HEADER_SIZE:
        raise BadInput(f"safetensors header length {n} exceeds the 100 MB limit", path=path)
    if 8 + n > file_size:
        raise BadInput(f"safetensors header length {n} is larger than the file ({file_size} bytes)", path=path)
    raw = f.read(n)
    if len(raw) != n:
        raise BadInput(f"file ends inside the safetensors header ({len(raw)} of {n} bytes)", path=path)
    return parse_header_bytes(raw, file_size - 8 - n, path, header_size=n, file_size=file_size)


def parse_header_bytes(raw: bytes, buffer_size: int | None, path: str, *, header_size: int | None = None,
                       file_size: int | None = None) -> SafetensorsHeader:
    """Validate a header given as bytes; ``buffer_size`` is None when the data size is unknown (hub)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise BadInput(f"safetensors header is not UTF-8 (byte {err.start})", path=path) from None
    if not text.lstrip(" ").startswith("{"):
        raise BadInput("safetensors header does not start with '{'", path=path)
    try:
        obj = json.loads(text, object_pairs_hook=_no_duplicates)
    except _Duplicate as dup:
        raise BadInput(f"safetensors header has duplicate key {dup.args[0]!r}", path=path) from None
    except (ValueError, RecursionError) as err:
        raise BadInput(f"safetensors header is not valid JSON ({_short(err)})", path=path) from None
    if not isinstance(obj, dict):
        raise BadInput("safetensors header is not a JSON object", path=path)
    meta = obj.pop("__metadata__", None) or {}
    if not isinstance(meta, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in meta.items()):
        raise BadInput("safetensors __metadata__ must map strings to strings", path=path)
    tensors: dict[str, TensorEntry] = {}
    for name, info in obj.items():
        tensors[name] = _entry(name, info, buffer_size, path)
    _check_coverage(tensors, buffer_size, path)
    return SafetensorsHeader(path=path, tensors=tensors, metadata=dict(meta),
                             header_size=header_size if header_size is not None else len(raw),
                             file_size=file_size if file_size is not None else -1)


class _Duplicate(Exception):
    pass


def _no_duplicates(pairs):
    out = {}
    for k, v in pairs:
        if k in out:
            raise _Duplicate(k)
        out[k] = v
    return out


def _short(err: Exception) -> str:
    return str(err).splitlines()[0][:120] if str(err) else type(err).__name__


def _entry(name: str, info, buffer_size: int | None, path: str) -> TensorEntry:
    where = f"tensor {name!r}"
    if not isinstance(info, dict):
        raise BadInput(f"{where}: entry is not an object", path=path)
    dtype = info.get("dtype")
    if not isinstance(dtype, str) or dtype not in DTYPE_BITS:
        raise BadInput(f"{where}: unknown dtype {dtype!r}", path=path)
    shape = info.get("shape")
    numel = 1
    if not isinstance(shape, list):
        raise BadInput(f"{where}: shape must be a list of non-negative integers", path=path)
    for d in shape:
        if type(d) is not int or d < 0:
            raise BadInput(f"{where}: shape must be a list of non-negative integers", path=path)
        numel *= d
    offs = info.get("data_offsets")
    if not (isinstance(offs, list) and len(offs) == 2 and type(offs[0]) is int and type(offs[1]) is int):
        raise BadInput(f"{where}: data_offsets must be [begin, end] integers", path=path)
    begin, end = offs
    if begin < 0 or end < begin:
        raise BadInput(f"{where}: data_offsets {offs} are invalid", path=path)
    if buffer_size is not None and end > buffer_size:
        raise BadInput(f"{where}: data_offsets {offs} lie outside the file (data buffer is {buffer_size} bytes: "
                       "truncated file?)",
                       path=path)
    bits = numel * DTYPE_BITS[dtype]
    if bits % 8:
        raise BadInput(f"{where}: {numel} x {dtype} does not fill whole bytes", path=path)
    if end - begin != bits // 8:
        raise BadInput(f"{where}: data_offsets span {end - begin} bytes but {dtype}{shape} needs {bits // 8}",
                       path=path)
    return TensorEntry(name=name, dtype=dtype, shape=tuple(shape), begin=begin, end=end)


def _check_coverage(tensors: dict[str, TensorEntry], buffer_size: int | None, path: str) -> None:
    """Tensors must not overlap; with a known buffer size they must cover it exactly (no holes)."""
    spans = sorted((t.begin, t.end, t.name) for t in tensors.values() if t.end > t.begin)
    pos = 0
    for begin, end, name in spans:
        if begin < pos:
            raise BadInput(f"tensor {name!r}: data_offsets [{begin}, {end}] overlap another tensor", path=path)
        if begin > pos:
            raise BadInput(f"tensor {name!r}: data_offsets [{begin}, {end}] leave a hole at byte {pos}", path=path)
        pos = end
    if buffer_size is not None and pos != buffer_size:
        if pos < buffer_size:
            raise BadInput(f"data buffer has {buffer_size - pos} bytes not covered by any tensor "
                           f"(truncated header or trailing garbage)", path=path)
