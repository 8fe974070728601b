"""Modules from safetensors headers: group tensors by module, read the stored format off the
dtypes and shapes of each module's weight and its companions (scales, zeros, global scales).

Header heuristics follow shared/research/checkpoint-formats.md §5 step 8; the config, when
present, decides what headers cannot (dynamic activations, int bit width of packed words).
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod
from typing import NamedTuple

from advisor.checkpoint.model import ActQuant, WeightQuant
from advisor.checkpoint.schemes import dtype_format

class ModuleTensor(NamedTuple):
    """One tensor of a module, fields named: a safetensors_header.TensorEntry whose first field is the suffix
    within the module (shards.ShardGrouper keeps them as plain tuples of these fields)."""

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
        return prod(self.shape)



# Companion suffixes after a '.', longest first.
_DOT_SUFFIXES = (
    "weight.quant_state.bitsandbytes__nf4", "weight.quant_state.bitsandbytes__fp4", "weight.nested_quant_map",
    "weight.nested_absmax", "weight.quant_map", "weight.absmax", "weight.SCB", "weight_format",
    "weight_global_scale", "input_global_scale", "weight_zero_point", "weight_scale_inv", "weight_scale_2",
    "weight_scale", "weight_packed", "weight_shape", "weight_g_idx", "input_scale", "output_scale",
    "pre_quant_scale", "k_scale", "v_scale", "qweight", "qzeros", "scales", "g_idx", "weight", "bias", "SCB",
)
# Suffixes glued with '_' to a non-"weight" parameter (gpt-oss *_blocks/_scales/_bias, ModelOpt X_weight_scale).
_UNDERSCORE_SUFFIXES = ("weight_scale_2", "weight_scale", "input_scale", "blocks", "scales", "bias")

_MAIN = ("weight", "weight_packed", "qweight", "blocks", "param")


def main_tensor(tensors: dict[str, ModuleTensor]) -> ModuleTensor | None:
    """A module's weight (or packed weight, blocks, bare parameter) among its tensors by suffix."""
    for s in _MAIN:
        if s in tensors:
            return tensors[s]
    return None


@dataclass(slots=True)
class ModuleTensors:
    """The headers' tensors grouped by module (shards.group_shards), three containers for all modules (no object
    per module: a 100k-tensor MoE has 25k; benchmarks/inspect_speed.py)."""

    tensors: dict[str, dict[str, tuple]]     # module name -> suffix -> entry (ModuleTensor's fields), header order
    paths: list[str]                                # the shard of each module's first tensor, in the same order
    shards: dict[str, dict[str, str]]               # module -> suffix -> shard of a tensor outside that one


_ONE_PART = {s: s for s in _DOT_SUFFIXES if "." not in s}


def split_name(name: str, names: set[str], ndim: int) -> tuple[str, str]:
    parent, _, last = name.rpartition(".")
    if parent and last in _ONE_PART:
        return parent, last
    if ".weight." in name:                       # bitsandbytes companions: weight.absmax, weight.quant_state.*
        for suf in _DOT_SUFFIXES:
            if name.endswith("." + suf):
                return name[: -len(suf) - 1], suf
    for suf in _UNDERSCORE_SUFFIXES:
        if name.endswith("_" + suf):
            base = name[: -len(suf) - 1]
            if base in names or base + "_blocks" in names:
                return base, suf
    if ndim >= 2:
        return name, "param"            # a bare matrix parameter, e.g. 3-D fused experts "mlp.experts.gate_up_proj"
    if "." in name:
        parent, last = name.rsplit(".", 1)
        # a small parameter of its parent module (A_log, dt_bias, e_score_correction_bias)
        return parent, last
    return name, "param"


@dataclass(frozen=True)
class Observed:
    """What the header says about one module."""

    weight: WeightQuant
    act: ActQuant | None            # None: the header cannot tell (dynamic or none)
    shape: tuple[int, int] | None   # logical (out, in) of one member
    count: int                      # members (3-D expert stacks hold several)
    params: int
    evidence: str                   # short description of the tensors that decided it
    has_scale: bool = True


_S = "weight_scale"


def observe(t: dict[str, ModuleTensor], *, int_bits: int | None = None) -> Observed | None:
    """Read the stored format of a module off its tensors (suffix -> entry); None when it has no matrix weight."""
    main = main_tensor(t)
    if main is None:
        return None
    dt = main.dtype
    shp = main.shape
    has = t.__contains__
    static_in = has("input_scale") or has("input_global_scale")
    # gpt-oss MXFP4 experts: *_blocks U8 [E, out, G, 16] + *_scales U8 [E, out, G]
    if has("blocks") and len(shp) == 4:
        e, out, g, b = shp
        return Observed(WeightQuant("mxfp4", 4, "mxfp4", group_size=32, symmetric=True, packing="uint8-2-per-byte"),
                        None, (out, g * b * 2), e, e * out * g * b * 2, "U8 *_blocks + U8 *_scales (E8M0 per 32)")
    stack = shp[0] if len(shp) == 3 else 1
    if len(shp) < 2:
        if dt in ("BF16", "F16", "F32"):
            return Observed(WeightQuant(dtype_format(dt), _bits(dt)), ActQuant(), None, 1, main.numel, f"{dt} vector")
        if has("weight.absmax") or any(k.startswith("weight.quant_state") for k in t):
            # bitsandbytes 4-bit: flattened U8 [n/2, 1]; the logical shape lives in quant_state (data).
            return _bnb4(t)
        return None
    rows, cols = shp[-2], shp[-1]
    if has("weight.absmax") or any(k.startswith("weight.quant_state") for k in t):
        return _bnb4(t)
    ws = t.get(_S)
    # ---- NVFP4 (ModelOpt: weight U8 + weight_scale F8_E4M3 + weight_scale_2; CT: weight_packed + weight_global_scale)
    if dt == "U8" and ws is not None and ws.dtype == "F8_E4M3" and (has("weight_scale_2")
                                                                    or has("weight_global_scale")):
        k = cols * 2
        gs: int | None = k // ws.shape[-1] if ws.shape and ws.shape[-1] else 16
        act = ActQuant("nvfp4", dynamic=True, granularity="group", group_size=16) if static_in else None
        src = "weight_packed U8 + F8_E4M3 weight_scale + weight_global_scale" if has("weight_packed") \
            else "weight U8 + F8_E4M3 weight_scale + F32 weight_scale_2"
        return Observed(WeightQuant("nvfp4", 4, "nvfp4", group_size=gs, symmetric=True, packing="uint8-2-per-byte"),
                        act, (rows, k), stack, stack * rows * k, src)
    # ---- MXFP4 (CT mxfp4-pack-quantized / ModelOpt mxfp4: U8 weight + U8 E8M0 scale per 32)
    if dt == "U8" and ws is not None and ws.dtype in ("U8", "F8_E8M0") and len(ws.shape) >= 2:
        k = cols * 2
        return Observed(WeightQuant("mxfp4", 4, "mxfp4", group_size=32, symmetric=True, packing="uint8-2-per-byte"),
                        None, (rows, k), stack, stack * rows * k, "U8 weight + U8 E8M0 scale per 32")
    # ---- ModelOpt INT4 AWQ: weight U8 [N/2, K] packed along the output dim, weight_scale [N, K/g]
    if dt == "U8" and ws is not None and len(ws.shape) >= 2 and ws.shape[-2] == 2 * rows:
        n, k = ws.shape[-2], cols
        gs = k // ws.shape[-1] if ws.shape[-1] else None
        act = ActQuant("fp8_e4m3", dynamic=False, granularity="tensor") if static_in else ActQuant()
        return Observed(WeightQuant("int4", 4, "group", group_size=gs, symmetric=True, packing="uint8-2-per-byte-dim0"),
                        act, (n, k), stack, stack * n * k, "U8 weight [N/2, K] + weight_scale [N, K/g] (ModelOpt INT4)")
    # ---- CT pack-quantized: weight_packed I32 [N, K*b/32] (+ weight_shape, weight_scale [N, K/g])
    if t.get("weight_packed") is main and dt == "I32":
        bits = int_bits or 4
        k = cols * 32 // bits
        gran, gs = _int_granularity(ws, rows, k)
        return Observed(WeightQuant(f"int{bits}" if not has("weight_zero_point") else f"uint{bits}", bits, gran,
                                    group_size=gs, symmetric=not has("weight_zero_point"),
                                    packing=f"int32-{32 // bits}-per-word"),
                        None, (rows, k), stack, stack * rows * k, f"I32 weight_packed ({bits}-bit per config)")
    # ---- GPTQ / AWQ: qweight I32 + qzeros + scales [K/g, N]
    if t.get("qweight") is main:
        sc = t.get("scales")
        if sc is None or len(sc.shape) != 2:
            return Observed(WeightQuant("int4", 4, "unknown"), None, None, 1, main.numel * 8, "qweight without scales",
                            has_scale=False)
        n = sc.shape[1]
        if rows is not None and cols == n:                    # GPTQ: qweight [K/pack, N]
            if has("g_idx") and t["g_idx"].shape:
                k = t["g_idx"].shape[0]
                bits = max(1, 32 * rows // k) if k else (int_bits or 4)
            else:
                bits = int_bits or 4
                k = rows * 32 // bits
            packing, kind = f"int32-{32 // bits}-per-word", "GPTQ"
        else:                                                  # AWQ: qweight [K, N/pack]
            k = rows
            bits = max(1, 32 * cols // n) if n else 4
            packing, kind = "int32-8-per-word-awq-order", "AWQ"
        groups = sc.shape[0]
        gs = k // groups if groups and groups > 1 else None
        return Observed(WeightQuant(f"int{bits}", bits, "group" if gs else "channel", group_size=gs,
                                    symmetric=not has("qzeros"), packing=packing),
                        ActQuant(), (n, k), 1, n * k, f"{kind} qweight I32 + scales [{groups}, {n}]")
    # ---- FP8: weight F8_E4M3 (+ weight_scale / weight_scale_inv)
    if dt in ("F8_E4M3", "F8_E5M2"):
        fmt = dtype_format(dt)
        sinv = t.get("weight_scale_inv")
        sc = sinv if sinv is not None else ws
        if sc is None:
            return Observed(WeightQuant(fmt, 8, "none"), None, (rows, cols), stack, main.numel,
                            f"{dt} weight without any scale", has_scale=False)
        gran, gs, block = _fp8_granularity(sc, rows, cols)
        act = ActQuant(fmt, dynamic=False, granularity="tensor") if static_in else None
        what = "weight_scale_inv" if sinv is not None else "weight_scale"
        return Observed(WeightQuant(fmt, 8, gran, group_size=gs, block=block, symmetric=True), act,
                        (rows, cols), stack, main.numel, f"{dt} weight + {sc.dtype} {what} {list(sc.shape)}")
    # ---- INT8: weight I8 (+ weight_scale / SCB)
    if dt == "I8":
        sc = ws if ws is not None else t.get("weight.SCB", t.get("SCB"))
        if sc is None:
            return Observed(WeightQuant("int8", 8, "none"), None, (rows, cols), stack, main.numel,
                            "I8 weight without any scale", has_scale=False)
        gran, gs = _int_granularity(sc, rows, cols)
        act = ActQuant("int8", dynamic=False, granularity="tensor") if static_in else None
        return Observed(WeightQuant("int8", 8, gran, group_size=gs, symmetric=not has("weight_zero_point")), act,
                        (rows, cols), stack, main.numel, f"I8 weight + {sc.dtype} scale {list(sc.shape)}")
    if dt in ("BF16", "F16", "F32", "F64"):
        return Observed(WeightQuant(dtype_format(dt), _bits(dt)), ActQuant(), (rows, cols), stack, main.numel,
                        f"{dt} weight")
    if dt == "U8" and ws is None:
        return Observed(WeightQuant("uint8", 8, "none"), None, (rows, cols), stack, main.numel,
                        "U8 weight without scales", has_scale=False)
    return Observed(WeightQuant(dtype_format(dt), _bits(dt), "unknown"), None, (rows, cols), stack, main.numel,
                    f"{dt} weight (unrecognised layout)")


def _bnb4(t: dict[str, ModuleTensor]) -> Observed:
    main = t["weight"]
    qt = "nf4" if any(k.endswith("nf4") for k in t) else "fp4"
    return Observed(WeightQuant(qt, 4, "group", group_size=64, packing="uint8-2-per-byte"), ActQuant(), None, 1,
                    main.numel * 2, f"bitsandbytes {qt}: U8 weight + absmax + quant_state")


def _bits(dtype: str) -> int:
    from advisor.checkpoint.safetensors_header import DTYPE_BITS

    return DTYPE_BITS.get(dtype, 16)


def _fp8_granularity(sc: ModuleTensor, n: int, k: int):
    shape = sc.shape
    if sc.numel == 1:
        return "tensor", None, None
    if len(shape) == 1 or (len(shape) == 2 and shape[1] == 1):
        return "channel", None, None
    if len(shape) == 2 and shape[0] == n and shape[1] > 1:
        return "group", k // shape[1], None
    if len(shape) >= 2:
        br, bc = _block(n, shape[-2]), _block(k, shape[-1])
        return "block", None, (br, bc)
    return "unknown", None, None


def _block(dim: int, nblocks: int) -> int:
    """Block edge from a dimension and its block count (ceil division by a power of two)."""
    if not nblocks:
        return dim
    b = 1
    while -(-dim // b) > nblocks:
        b *= 2
    return b


def _int_granularity(sc: ModuleTensor | None, n: int, k: int):
    if sc is None or sc.numel == 1:
        return "tensor", None
    shape = sc.shape
    if len(shape) == 1 or (len(shape) == 2 and shape[1] == 1):
        return "channel", None
    if len(shape) == 2 and shape[1]:
        return "group", k // shape[1] if shape[1] else None
    return "unknown", None
