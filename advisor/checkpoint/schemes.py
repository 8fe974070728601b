"""Scheme labels from (weight, activation) formats, and stored bytes of a format for a given shape."""

from __future__ import annotations

from advisor.checkpoint.model import ActQuant, Scheme, WeightQuant

UNQUANTIZED_FORMATS = frozenset({"bf16", "fp16", "fp32"})
# Weight formats with no kernel family of their own in the engines' rules: their label names the format.
FOREIGN_LABELS: dict[str, Scheme] = {"exl2": "EXL2", "exl3": "EXL3", "ternary": "BITNET", "mlx_affine": "MLX",
                                     "hqq": "HQQ", "aqlm": "AQLM", "gguf": "GGUF", "unknown": "UNKNOWN"}
BF16 = WeightQuant()
NO_ACT = ActQuant()


def is_quantized(w: WeightQuant) -> bool:
    return w.format not in UNQUANTIZED_FORMATS


def scheme_label(w: WeightQuant, a: ActQuant) -> Scheme:
    """The scheme a module runs as: W<bits>A<bits>-<weight family>.

    Int4 weights with int8/int4 activations and similar rare combinations have no label of
    their own; they map to the weight-only label of their weight family (the kernel families
    that serve them are weight-only everywhere but CPU/ARM).
    """
    f = w.format
    if f == "fp16":
        return "FP16"
    if f in FOREIGN_LABELS:
        return FOREIGN_LABELS[f]
    if f in UNQUANTIZED_FORMATS:
        return "BF16"
    act = a.format
    if f in ("fp8_e4m3", "fp8_e5m2"):
        return "W8A8-FP8" if act in ("fp8_e4m3", "fp8_e5m2") else "W8A16-FP8"
    if f == "int8":
        return "W8A8-INT8" if act == "int8" else "W8A16-INT8"
    if f == "nvfp4":
        return _NVFP4_BY_ACT.get(act, "W4A16-NVFP4")
    if f == "mxfp4":
        return _MXFP4_BY_ACT.get(act, "W4A16-MXFP4")
    if act == "fp8_e4m3":
        return "W4A8-FP8"
    return "W4A16-INT4"  # int4 / uint4 / nf4 / fp4 (bnb) / int2-int7 weight-only


_NVFP4_BY_ACT: dict[str, Scheme] = {"nvfp4": "W4A4-NVFP4", "fp8_e4m3": "W4A8-FP8"}
_MXFP4_BY_ACT: dict[str, Scheme] = {"mxfp4": "W4A4-MXFP4", "nvfp4": "W4A4-MXFP4", "fp8_e4m3": "W4A8-FP8"}


def dtype_format(dtype: str) -> str:
    return {"BF16": "bf16", "F16": "fp16", "F32": "fp32", "F64": "fp32", "F8_E4M3": "fp8_e4m3",
            "F8_E5M2": "fp8_e5m2", "I8": "int8", "U8": "uint8"}.get(dtype, dtype.lower())


def stored_bytes(w: WeightQuant, out_f: int, in_f: int, *, scale_bytes: int = 2) -> int:
    """Bytes on disk of one (out_f x in_f) weight in format ``w``, scales included (no bias).

    Scale widths follow the producers: NVFP4 E4M3 per 16 + F32 global; MXFP4 E8M0 per 32;
    FP8 block F32 per block; group scales in the checkpoint dtype (``scale_bytes``).
    """
    n = out_f * in_f
    f = w.format
    if f in ("bf16", "fp16", "unknown"):          # unknown: at most 16 bits (doctor says it is an upper bound)
        return 2 * n
    if w.bpw:                                     # EXL2 / EXL3 / GGUF: the declared average incl. scales
        return int(round(n * w.bpw / 8))
    if f == "ternary":                            # BitNet: 4 ternary values per byte + one scale per tensor
        return -(-n // 4) + 4
    if f == "aqlm" and w.group_size and w.block:   # codes + fp16 codebooks + fp16 scales (block = books, bits)
        books, nbits = w.block
        codes = n // w.group_size * books * nbits // 8
        return codes + books * (2 ** min(nbits, 20)) * w.group_size * 2 + out_f * 2
    if f in ("mlx_affine", "hqq") and w.group_size:   # data + a 16-bit scale and bias/zero per group
        return (n * w.bits + 7) // 8 + _ceil(in_f, w.group_size) * out_f * 4
    if f == "fp32":
        return 4 * n
    if f == "nvfp4":
        return n // 2 + _ceil(in_f, 16) * out_f + 4 + 4
    if f == "mxfp4":
        return n // 2 + _ceil(in_f, 32) * out_f
    bits = w.bits or 8
    data = (n * bits + 7) // 8
    g = w.granularity
    if g == "tensor":
        return data + 4
    if g == "channel":
        return data + out_f * scale_bytes
    if g == "block" and w.block:
        return data + _ceil(out_f, w.block[0]) * _ceil(in_f, w.block[1]) * 4
    if g in ("group", "mxfp4") and w.group_size:
        groups = _ceil(in_f, w.group_size) * out_f
        zeros = 0 if w.symmetric is not False else (groups * bits + 7) // 8
        return data + groups * scale_bytes + zeros
    return data + out_f * scale_bytes


def _ceil(a: int, b: int) -> int:
    return -(-a // b) if b else 0
