"""Which quantized layout each module of a checkpoint is stored in.

A module's layout is read off its tensors (names, dtypes, shapes; checkpoint-formats.md §5 step 8),
with the config deciding what headers cannot (GPTQ bits and v1/v2 zero offset, AWQ version, block
shapes). advisor.quality.dequantize reads each layout back as float32.
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
