"""Which quantized layout each module of a checkpoint is stored in, and its dequantization.

A module's layout is read off its tensors (names, dtypes, shapes; checkpoint-formats.md §5 step 8),
with the config deciding what headers cannot (GPTQ bits and v1/v2 zero offset, AWQ version, block
shapes). Every layout dequantizes row ranges of its logical matrix [rows, K] (3-D expert stacks are
flattened to rows = experts x out) to float32, so memory holds one chunk, never a whole tensor.

Math per layout (w = dequantized weight; codes unpacked with advisor.quality.codecs):
- NVFP4, ModelOpt:           w = e2m1[code] * (f32(e4m3 weight_scale) * weight_scale_2)      (§2.5)
- NVFP4, compressed-tensors: w = e2m1[code] * (f32(e4m3 weight_scale) / weight_global_scale) (§3.4,
                             compressed_tensors forward_helpers._dequantize: scale / global_scale)
- MXFP4 (CT, gpt-oss):       w = e2m1[code] * 2^(e8m0 - 127)                                  (§3.3, §4.5)
- FP8 E4M3/E5M2:             w = fp8[code] * scale, scale per tensor / row / 2-D block / group (§2.7, §4.1)
- INT, compressed-tensors:   w = ((code - 2^(b-1)) - zero_point) * scale[group]                (§3.3)
- INT8 (I8 weight):          w = (q - zero_point) * scale
- GPTQ:                      w = scale[g_idx[k]] * (code - (zero[g_idx[k]] + 1)); v2 drops the +1 (§4.2)
- AWQ (gemm):                w = (code - zero[k // g]) * scale[k // g], AWQ column order       (§4.3)
- INT4, ModelOpt W4A16_AWQ:  w = q * weight_scale[k // g], q signed 4-bit paired along rows (§2.4)
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from advisor.convert.safetensors_io import NUMPY_VIEW, TensorEntry, read_bytes
from advisor.convert.source import Checkpoint
from advisor.errors import BadInput
from advisor.quality import codecs as c

FLOAT_DTYPES = ("BF16", "F16", "F32")
_DOT_PARTS = ("weight_scale_2", "weight_scale_inv", "weight_scale", "weight_global_scale", "input_global_scale",
              "input_scale", "weight_zero_point", "weight_shape", "weight_g_idx", "weight_packed", "pre_quant_scale",
              "qweight", "qzeros", "scales", "g_idx", "weight", "output_scale", "k_scale", "v_scale")
_QUANT_DTYPES = ("U8", "I8", "I32", "F8_E4M3", "F8_E5M2")


@dataclass(frozen=True)
class Layout:
    kind: str            # nvfp4 | mxfp4 | fp8 | int
    producer: str        # modelopt | compressed-tensors | gpt-oss | gptq | awq | fp8-block-scale
    granularity: str     # block16 | block32 | tensor | channel | block | group
    bits: int
    label: str           # e.g. "NVFP4 (ModelOpt)", "INT4 group 128 (GPTQ v1)"

    @property
    def family(self) -> str:
        """The format a user compares (NVFP4, MXFP4, FP8, INT4, INT8)."""
        return {"nvfp4": "NVFP4", "mxfp4": "MXFP4", "fp8": "FP8"}.get(self.kind, f"INT{self.bits}")


@dataclass(frozen=True)
class QuantTensor:
    """One quantized weight: where its parts are and how to read it as a matrix [rows, cols]."""

    module: str
    name: str                         # the BF16 tensor this stands for (module.weight, or gpt-oss's param)
    layout: Layout
    rows: int                         # experts x out
    cols: int                         # K (in features)
    stack: int                        # experts in a 3-D stack (1 for a plain linear)
    group: int                        # elements along K per scale group
    row_block: int                    # rows per scale block (128 for FP8 128x128 blocks, else 1)
    parts: dict[str, TensorEntry]
    params: dict = field(default_factory=dict)

    @property
    def stored_names(self) -> tuple[str, ...]:
        return tuple(e.name for e in self.parts.values())

    @property
    def out_shape(self) -> tuple[int, ...]:
        """Shape of the BF16 weight a dequantized copy holds (the reference layout)."""
        n = self.rows // self.stack
        if self.layout.producer == "gpt-oss":
            return (self.stack, self.cols, n)           # transformers GptOss: [E, in, out]
        return (self.stack, n, self.cols) if self.params.get("ndim") == 3 else (n, self.cols)


@dataclass(frozen=True)
class Dequant:
    values: np.ndarray      # float32 [r, K]
    at_limit: np.ndarray    # bool [r, K]: code at the format's largest magnitude (clipping possible)
    half_step: np.ndarray   # float32 [r, K]: half the spacing below that largest magnitude


# ------------------------------------------------------------------ grouping and detection

def group_modules(ck: Checkpoint) -> dict[str, dict[str, TensorEntry]]:
    """Tensors by module: {'model.layers.0.self_attn.q_proj': {'weight': e, 'weight_scale': e, ...}}.
    gpt-oss experts: {'...experts.gate_up_proj': {'blocks': e, 'scales': e, 'bias': e}}."""
    mods: dict[str, dict[str, TensorEntry]] = {}
    names = set(ck.tensors)
    for name, e in ck.tensors.items():
        parent, _, last = name.rpartition(".")
        for suffix in ("blocks", "scales"):
            base = name[: -len(suffix) - 1]
            if name.endswith("_" + suffix) and (base + "_blocks") in names and (base + "_scales") in names:
                mods.setdefault(base, {})[suffix] = e
                break
        else:
            if parent and last in _DOT_PARTS:
                mods.setdefault(parent, {})[last] = e
            else:
                mods.setdefault(name, {})["param"] = e
    return mods


def quant_config(ck: Checkpoint) -> dict:
    qc = ck.config.get("quantization_config")
    if not isinstance(qc, dict):
        text = ck.config.get("text_config")
        qc = text.get("quantization_config") if isinstance(text, dict) else None
    if not isinstance(qc, dict):
        path = ck.root / "quantize_config.json"          # AutoGPTQ writes its config here
        if path.is_file():
            from advisor.convert.source import _load_json

            qc = _load_json(path)
    return qc if isinstance(qc, dict) else {}


def _numel(e: TensorEntry) -> int:
    return math.prod(e.shape)


def read_small(e: TensorEntry) -> np.ndarray:
    """A small tensor's raw values (scales, zero points, g_idx), read whole."""
    return np.frombuffer(read_bytes(e), NUMPY_VIEW[e.dtype]).reshape(e.shape)


def _block_edge(dim: int, blocks: int) -> int:
    edge = 1
    while -(-dim // edge) > blocks:
        edge *= 2
    return edge


def _bad(module: str, ck: Checkpoint, what: str) -> BadInput:
    return BadInput(f"{module}: {what}", path=str(ck.root))


def _describe(parts: dict[str, TensorEntry]) -> str:
    return ", ".join(f"{k} {e.dtype} {list(e.shape)}" for k, e in sorted(parts.items()))


def detect(ck: Checkpoint) -> tuple[list[QuantTensor], list[str]]:
    """Quantized weights of a checkpoint, and the names of the floating-point matrices it keeps.
    Raises BadInput (one line) for a quantized-looking module whose layout is not supported."""
    qc = quant_config(ck)
    method = str(qc.get("quant_method", "")).lower()
    out: list[QuantTensor] = []
    kept: list[str] = []
    for module, parts in group_modules(ck).items():
        if "blocks" in parts:
            out.append(_gpt_oss(ck, module, parts))
            continue
        main = parts.get("weight_packed") or parts.get("qweight") or parts.get("weight")
        if main is None:
            continue
        if main.dtype in FLOAT_DTYPES:
            if len(main.shape) >= 2:
                kept.append(main.name)
            continue
        if main.dtype not in _QUANT_DTYPES or len(main.shape) < 2:
            raise _bad(module, ck, f"unsupported quantization layout ({_describe(parts)})")
        out.append(_detect_module(ck, module, parts, qc, method))
    return out, kept


def _detect_module(ck, module, parts, qc, method) -> QuantTensor:
    ws, main = parts.get("weight_scale"), parts.get("weight_packed") or parts.get("qweight") or parts["weight"]
    shape = main.shape
    stack = shape[0] if len(shape) == 3 else 1
    rows = stack * shape[-2]
    params = {"ndim": len(shape)}
    if main.dtype == "U8" and ws is not None and ws.dtype == "F8_E4M3":
        if "weight_scale_2" in parts:
            producer, glob = "modelopt", parts["weight_scale_2"]
        elif "weight_global_scale" in parts:
            producer, glob = "compressed-tensors", parts["weight_global_scale"]
        else:
            raise _bad(module, ck, f"NVFP4-looking weight without a global scale ({_describe(parts)})")
        k = shape[-1] * 2
        if ws.shape[-1] * 16 != k or _numel(ws) * 16 != rows * k:
            raise _bad(module, ck, f"weight_scale {list(ws.shape)} does not fit weight {list(shape)} (one per 16)")
        if _numel(glob) not in (1, stack):
            raise _bad(module, ck, f"global scale {list(glob.shape)} is neither one value nor one per expert")
        return QuantTensor(module, module + ".weight", Layout("nvfp4", producer, "block16", 4,
                           f"NVFP4 ({'ModelOpt' if producer == 'modelopt' else 'compressed-tensors'})"),
                           rows, k, stack, 16, 1, dict(parts), params)
    if main.dtype == "U8" and ws is not None and ws.dtype in ("U8", "F8_E8M0") and len(ws.shape) >= 2 and \
            ws.shape[-1] * 32 == shape[-1] * 2:
        k = shape[-1] * 2
        return QuantTensor(module, module + ".weight", Layout("mxfp4", "compressed-tensors", "block32", 4,
                                                              "MXFP4 (compressed-tensors)"),
                           rows, k, stack, 32, 1, dict(parts), params)
    if main.dtype == "U8" and ws is not None and len(shape) == 2 and ws.shape[0] == 2 * shape[0]:
        k = shape[1]
        g = k // ws.shape[1]
        if g * ws.shape[1] != k:
            raise _bad(module, ck, f"weight_scale {list(ws.shape)} does not divide K={k} into groups")
        return QuantTensor(module, module + ".weight", Layout("int", "modelopt", "group", 4,
                                                              f"INT4 group {g} (ModelOpt AWQ)"),
                           2 * shape[0], k, 1, g, 1, dict(parts), params)
    if "weight_packed" in parts and main.dtype == "I32":
        return _ct_pack(ck, module, parts, params)
    if "qweight" in parts:
        return _gptq_awq(ck, module, parts, qc, method)
    if main.dtype in c.FP8_TABLES:
        return _fp8(ck, module, parts, qc, params)
    if main.dtype == "I8" and ws is not None:
        k = shape[-1]
        g, gran = _int_groups(ck, module, ws, rows, k)
        return QuantTensor(module, module + ".weight", Layout("int", "compressed-tensors", gran, 8,
                                                              f"INT8 {_gran_text(gran, g)}"),
                           rows, k, stack, g, 1, dict(parts), {**params, "bits": 8})
    raise _bad(module, ck, f"unsupported quantization layout ({_describe(parts)})")


def _gran_text(gran: str, g: int) -> str:
    return f"group {g}" if gran == "group" else f"per-{gran}"


def _int_groups(ck, module, ws: TensorEntry, rows: int, k: int) -> tuple[int, str]:
    n = _numel(ws)
    if n == 1:
        return min(k, 128), "tensor"
    if ws.shape[0] == rows and (len(ws.shape) == 1 or ws.shape[-1] == 1):
        return min(k, 128), "channel"
    if len(ws.shape) == 2 and ws.shape[0] == rows and k % ws.shape[1] == 0:
        return k // ws.shape[1], "group"
    raise _bad(module, ck, f"scale {list(ws.shape)} fits neither per-tensor, per-channel nor groups of [{rows}, {k}]")


def _ct_pack(ck, module, parts, params) -> QuantTensor:
    packed, ws, shp = parts["weight_packed"], parts.get("weight_scale"), parts.get("weight_shape")
    if ws is None or shp is None:
        raise _bad(module, ck, f"pack-quantized weight without weight_scale/weight_shape ({_describe(parts)})")
    shape = tuple(int(x) for x in read_small(shp).reshape(-1))
    if len(shape) != 2 or shape[0] != packed.shape[0]:
        raise _bad(module, ck, f"weight_shape {list(shape)} does not match weight_packed {list(packed.shape)}")
    rows, k = shape
    bits = packed.shape[1] * 32 // k
    if not 1 <= bits <= 8 or math.ceil(k * bits / 32) != packed.shape[1]:
        raise _bad(module, ck, f"weight_packed {list(packed.shape)} is not a dense packing of K={k}")
    g, gran = _int_groups(ck, module, ws, rows, k)
    sym = "weight_zero_point" not in parts
    label = f"INT{bits} {_gran_text(gran, g)}{'' if sym else ' asymmetric'} (compressed-tensors)"
    return QuantTensor(module, module + ".weight", Layout("int", "compressed-tensors", gran, bits, label),
                       rows, k, 1, g, 1, dict(parts), {**params, "bits": bits})


def _gptq_awq(ck, module, parts, qc, method) -> QuantTensor:
    qw, sc, qz = parts["qweight"], parts.get("scales"), parts.get("qzeros")
    if sc is None or qz is None or len(sc.shape) != 2 or len(qw.shape) != 2 or qw.dtype != "I32":
        raise _bad(module, ck, f"qweight without 2-D scales and qzeros ({_describe(parts)})")
    groups, n = sc.shape
    if qw.shape[1] == n:                                        # GPTQ: qweight [K*b/32, N]
        bits = int(qc.get("bits") or 4)
        if "g_idx" in parts and parts["g_idx"].shape:
            bits = 32 * qw.shape[0] // parts["g_idx"].shape[0]
        if bits not in (2, 4, 8):
            raise _bad(module, ck, f"GPTQ with {bits} bits per value is not supported (2, 4, 8)")
        k = qw.shape[0] * 32 // bits
        v2 = str(qc.get("checkpoint_format", "gptq")).lower() == "gptq_v2"
        g = k // groups
        label = f"INT{bits} {'group ' + str(g) if groups > 1 else 'per-channel'} (GPTQ {'v2' if v2 else 'v1'})"
        return QuantTensor(module, module + ".weight", Layout("int", "gptq", "group", bits, label),
                           n, k, 1, g, 1, dict(parts), {"bits": bits, "zero_offset": 0 if v2 else 1, "ndim": 2,
                                                      "symmetric": bool(qc.get("sym", True))})
    version = str(qc.get("version", "gemm")).lower()
    bits = int(qc.get("bits") or qc.get("w_bit") or 4)
    if method == "awq" and version != "gemm" or bits != 4 or qw.shape[1] * 8 != n:
        raise _bad(module, ck, f"AWQ {version} with {bits} bits is not supported (only the GEMM layout, 4 bits)")
    k = qw.shape[0]
    g = k // groups
    return QuantTensor(module, module + ".weight", Layout("int", "awq", "group", 4, f"INT4 group {g} (AWQ)"),
                       n, k, 1, g, 1, dict(parts), {"bits": 4, "ndim": 2,
                                                    "symmetric": not qc.get("zero_point", True)})


def _fp8(ck, module, parts, qc, params) -> QuantTensor:
    main = parts["weight"]
    sc = parts.get("weight_scale_inv") or parts.get("weight_scale")
    if sc is None:
        raise _bad(module, ck, f"{main.dtype} weight without weight_scale or weight_scale_inv")
    shape = main.shape
    stack = shape[0] if len(shape) == 3 else 1
    rows, k = stack * shape[-2], shape[-1]
    n = shape[-2]
    s = sc.shape
    producer = ("fp8-block-scale" if "weight_scale_inv" in parts else
                "modelopt" if ck.hf_quant_config is not None else "compressed-tensors")
    wbs = qc.get("weight_block_size")
    groups = [cg for cg in (qc.get("config_groups") or {}).values() if isinstance(cg, dict)]
    declared = wbs or next((cg["weights"].get("block_structure") for cg in groups
                            if isinstance(cg.get("weights"), dict) and cg["weights"].get("block_structure")), None)
    if declared and len(s) >= 2 and (-(-n // declared[0]), -(-k // declared[1])) == tuple(s[-2:]):
        gran, g, rb = "block", int(declared[1]), int(declared[0])
        params = {**params, "block": (rb, g)}
    elif _numel(sc) == 1:
        gran, g, rb = "tensor", min(k, 128), 1
    elif _numel(sc) == stack and stack > 1:
        gran, g, rb = "tensor", min(k, 128), 1
    elif s[-1:] == (1,) and _numel(sc) == rows or len(s) == 1 and s[0] == rows:
        gran, g, rb = "channel", min(k, 128), 1
    elif len(s) >= 2 and s[-2] == n and s[-1] > 1 and k % s[-1] == 0:
        gran, g, rb = "group", k // s[-1], 1
    elif len(s) >= 2:
        br, bc = declared or (_block_edge(n, s[-2]), _block_edge(k, s[-1]))
        if -(-n // br) != s[-2] or -(-k // bc) != s[-1]:
            raise _bad(module, ck, f"block scale {list(s)} does not fit weight {list(shape)} in {br}x{bc} blocks")
        gran, g, rb = "block", int(bc), int(br)
        params = {**params, "block": (int(br), int(bc))}
    else:
        raise _bad(module, ck, f"scale {list(s)} does not fit weight {list(shape)}")
    fmt = "E4M3" if main.dtype == "F8_E4M3" else "E5M2"
    what = {"tensor": "per-tensor", "channel": "per-channel", "group": f"group {g}",
            "block": f"block {rb}x{g}"}[gran]
    who = {"fp8-block-scale": "block-scale", "modelopt": "ModelOpt", "compressed-tensors": "compressed-tensors"}
    return QuantTensor(module, module + ".weight", Layout("fp8", producer, gran, 8, f"FP8 {fmt} {what} "
                                                                                    f"({who[producer]})"),
                       rows, k, stack, g, rb, dict(parts), params)


def _gpt_oss(ck, module, parts) -> QuantTensor:
    b, s = parts["blocks"], parts["scales"]
    if b.dtype != "U8" or s.dtype not in ("U8", "F8_E8M0") or len(b.shape) != 4 or tuple(b.shape[:3]) != tuple(s.shape):
        raise _bad(module, ck, f"MXFP4 blocks {b.dtype} {list(b.shape)} / scales {s.dtype} {list(s.shape)} "
                               "are not [E, out, K/32, 16] / [E, out, K/32]")
    e, n, g, half = b.shape
    return QuantTensor(module, module, Layout("mxfp4", "gpt-oss", "block32", 4, "MXFP4 (gpt-oss)"),
                       e * n, g * half * 2, e, 32, 1, dict(parts), {"ndim": 3})


# ------------------------------------------------------------------ dequantization

def _rows2d(e: TensorEntry) -> np.ndarray:
    """Memory map of a tensor as a 2-D matrix [leading dims, last dim] (no copy)."""
    if e.nbytes == 0:
        return np.zeros((0, e.shape[-1] if e.shape else 0), NUMPY_VIEW[e.dtype])
    cols = e.shape[-1]
    return np.memmap(e.file, dtype=NUMPY_VIEW[e.dtype], mode="r", offset=e.offset,
                     shape=(math.prod(e.shape[:-1]), cols))


class Reader:
    """Row ranges of one quantized weight, dequantized. Small parts (global scales, zero points,
    g_idx) are read once; large ones are memory maps."""

    def __init__(self, qt: QuantTensor):
        self.qt = qt
        p, kind, prod = qt.parts, qt.layout.kind, qt.layout.producer
        self.per = qt.rows // qt.stack
        if kind == "nvfp4":
            self.main, self.scale = _rows2d(p.get("weight_packed") or p["weight"]), _rows2d(p["weight_scale"])
            if prod == "modelopt":
                self.glob = c.floats(read_small(p["weight_scale_2"]), p["weight_scale_2"].dtype).reshape(-1)
            else:
                self.glob = c.floats(read_small(p["weight_global_scale"]), p["weight_global_scale"].dtype).reshape(-1)
        elif kind == "mxfp4":
            if prod == "gpt-oss":
                b = p["blocks"]
                e, n, g, half = b.shape
                self.main = np.memmap(b.file, np.uint8, "r", offset=b.offset, shape=(e * n, g * half))
                self.scale = np.memmap(p["scales"].file, np.uint8, "r", offset=p["scales"].offset, shape=(e * n, g))
            else:
                self.main, self.scale = _rows2d(p.get("weight_packed") or p["weight"]), _rows2d(p["weight_scale"])
        elif kind == "fp8":
            self.main = _rows2d(p["weight"])
            sc = p.get("weight_scale_inv") or p["weight_scale"]
            self.scale = c.floats(read_small(sc), sc.dtype)
            self.table, _, self.half = c.FP8_TABLES[p["weight"].dtype]
            self.limit_code = int(np.argmax(np.where(np.isfinite(self.table[:0x80]), self.table[:0x80], -1)))
        elif prod in ("compressed-tensors", "modelopt"):
            main = p.get("weight_packed") or p["weight"]
            self.main = _rows2d(main)
            self.scale = c.floats(read_small(p["weight_scale"]), p["weight_scale"].dtype)
            self.bits = qt.layout.bits
            self.zero = None
            if "weight_zero_point" in p:
                z = p["weight_zero_point"]
                raw = read_small(z)
                if z.dtype == "I32" and self.bits < 8:     # packed along dim 0, with the 2^(b-1) offset
                    cols = raw.shape[-1]
                    self.zero = (c.unpack_dense(raw.reshape(-1, cols).T, self.bits, qt.rows).T
                                 - (1 << (self.bits - 1))).astype(np.float32)
                else:
                    self.zero = raw.astype(np.float32).reshape(qt.rows, -1)
            self.g_idx = read_small(p["weight_g_idx"]).astype(np.int64) if "weight_g_idx" in p else None
            self.pqs = c.floats(read_small(p["pre_quant_scale"]), p["pre_quant_scale"].dtype).reshape(-1) \
                if "pre_quant_scale" in p else None
        else:                                                          # gptq / awq
            self.qweight = _rows2d(p["qweight"])
            self.scale = c.floats(read_small(p["scales"]), p["scales"].dtype)
            bits = qt.params["bits"]
            order = c.AWQ_ORDER if prod == "awq" else None
            self.zero = c.unpack_cols(read_small(p["qzeros"]), bits, order).astype(np.float32)
            if prod == "gptq":
                self.zero += qt.params["zero_offset"]
                gi = p.get("g_idx")
                self.g_idx = read_small(gi).astype(np.int64) if gi is not None else np.arange(qt.cols) // qt.group
                if self.g_idx.shape != (qt.cols,) or self.g_idx.min() < 0 or self.g_idx.max() >= self.scale.shape[0]:
                    raise BadInput(f"{qt.module}: g_idx does not map {qt.cols} columns to {self.scale.shape[0]} groups",
                                   path=str(gi.file if gi is not None else qt.parts['qweight'].file))
            else:
                self.g_idx = np.arange(qt.cols) // qt.group

    # a chunk must not split what one stored row holds: AWQ packs 8 output rows per word column,
    # ModelOpt INT4 two rows per byte, FP8 blocks share a scale over 128 rows
    @property
    def row_multiple(self) -> int:
        prod = self.qt.layout.producer
        if prod == "awq":
            return 8
        if self.qt.layout.kind == "int" and prod == "modelopt":
            return 2
        return self.qt.row_block

    def rows(self, a: int, b: int) -> Dequant:
        qt = self.qt
        kind, prod = qt.layout.kind, qt.layout.producer
        if kind in ("nvfp4", "mxfp4"):
            codes = c.fp4_nibbles(np.asarray(self.main[a:b]))
            raw = np.asarray(self.scale[a:b])
            if kind == "nvfp4":
                glob = self.glob[np.arange(a, b) // self.per] if self.glob.size > 1 else self.glob[0]
                glob = np.asarray(glob, np.float32).reshape(-1, 1) if np.ndim(glob) else np.float32(glob)
                with np.errstate(divide="ignore", invalid="ignore"):
                    den = (c.E4M3_VALUES[raw] * glob if prod == "modelopt" else c.E4M3_VALUES[raw] / glob)
            else:
                den = c.e8m0_values(raw)
            den = np.repeat(den.astype(np.float32), qt.group, axis=1)
            vals = (c.fp4_values(codes) * den).astype(np.float32)
            return Dequant(vals, (codes & 7) == 7, (c.E2M1_HALF_TOP_STEP * den).astype(np.float32))
        if kind == "fp8":
            codes = np.asarray(self.main[a:b])
            scale = self._fp8_scale(a, b)
            vals = (self.table[codes] * scale).astype(np.float32)
            return Dequant(vals, (codes & 0x7F) == self.limit_code,
                           np.broadcast_to(np.float32(self.half) * scale, vals.shape).astype(np.float32))
        if prod in ("gptq", "awq"):
            return self._gptq_awq(a, b)
        return self._int(a, b)

    def _fp8_scale(self, a: int, b: int) -> np.ndarray:
        qt, s = self.qt, self.scale
        if qt.layout.granularity == "tensor":
            if s.size == 1:
                return np.float32(s.reshape(-1)[0])
            return s.reshape(-1)[np.arange(a, b) // self.per].reshape(-1, 1)
        if qt.layout.granularity == "channel":
            return s.reshape(-1)[a:b].reshape(-1, 1)
        if qt.layout.granularity == "group":
            return np.repeat(s.reshape(qt.rows, -1)[a:b], qt.group, axis=1)
        br, bc = qt.params["block"]
        n = self.per
        idx = np.arange(a, b)
        blocks = s.reshape(qt.stack, -1, s.shape[-1])[idx // n, (idx % n) // br]
        return np.repeat(blocks, bc, axis=1)[:, :qt.cols]

    def _int(self, a: int, b: int) -> Dequant:
        qt = self.qt
        bits = self.bits
        if qt.layout.producer == "modelopt":                      # two signed nibbles per byte along rows
            raw = np.asarray(self.main[a // 2:(b + 1) // 2])    # chunks start on even rows (row_multiple)
            q = np.empty((raw.shape[0] * 2, qt.cols), np.int32)
            q[0::2], q[1::2] = raw & 0xF, raw >> 4
            q = np.where(q >= 8, q - 16, q)[: b - a]
        elif qt.parts.get("weight_packed") is not None:
            q = c.unpack_dense(np.asarray(self.main[a:b]), bits, qt.cols) - (1 << (bits - 1))
        else:
            q = np.asarray(self.main[a:b]).astype(np.int32)
        qmin, qmax = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
        at_limit = (q == qmin) | (q == qmax)
        if self.scale.size == 1:
            scale = np.full((b - a, qt.cols), self.scale.reshape(-1)[0], np.float32)
        else:
            s = self.scale.reshape(qt.rows, -1)[a:b]
            gi = self.g_idx if self.g_idx is not None else (np.arange(qt.cols) // qt.group if s.shape[1] > 1 else
                                                             np.zeros(qt.cols, np.int64))
            scale = s[:, gi]
        qf = q.astype(np.float32)
        if self.zero is not None:
            z = self.zero[a:b]
            gi = self.g_idx if self.g_idx is not None else (np.arange(qt.cols) // qt.group if z.shape[1] > 1 else
                                                             np.zeros(qt.cols, np.int64))
            qf = qf - z[:, gi]
        vals = (qf * scale).astype(np.float32)
        if self.pqs is not None:                                  # AWQ smoothing kept beside the weight
            vals *= self.pqs[None, :]
            scale = scale * np.abs(self.pqs)[None, :]
        return Dequant(vals, at_limit, (0.5 * np.abs(scale)).astype(np.float32))

    def _gptq_awq(self, a: int, b: int) -> Dequant:
        qt = self.qt
        bits = qt.params["bits"]
        if qt.layout.producer == "gptq":
            q = c.unpack_rows(np.asarray(self.qweight[:, a:b]), bits)          # [K, r]
        else:
            q = c.unpack_cols(np.asarray(self.qweight[:, a // 8:b // 8]), 4, c.AWQ_ORDER)
        s = self.scale[:, a:b][self.g_idx]                                     # [K, r]
        z = self.zero[:, a:b][self.g_idx]
        vals = ((q - z) * s).T.astype(np.float32)
        at_limit = ((q == 0) | (q == (1 << bits) - 1)).T
        return Dequant(np.ascontiguousarray(vals), np.ascontiguousarray(at_limit),
                       np.ascontiguousarray((0.5 * np.abs(s)).T.astype(np.float32)))

    def close(self) -> None:
        for name in ("main", "scale", "qweight"):
            if isinstance(getattr(self, name, None), np.memmap):
                setattr(self, name, None)


def chunk_rows(qt: QuantTensor, reader: Reader, elements: int = 1 << 18) -> int:
    """Rows per chunk: about `elements` values, a multiple of what a stored row group holds."""
    mult = reader.row_multiple
    step = max(1, elements // max(qt.cols, 1))
    return max(mult, step // mult * mult)
