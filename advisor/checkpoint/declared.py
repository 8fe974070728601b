"""Where a checkpoint declares its quantization, file by file, in the keys engines dispatch on.

Engine-neutral and raw: what each config file says, before any engine normalises it. Engines differ in
which file they read and which keys they recognise (vLLM reads config.json's quantization_config and opens
hf_quant_config.json only when config.json has none); their rule files decide, this module only records.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class QuantDeclaration:
    """One file's quantization block, as written (strings lower/upper-cased as engines compare them)."""

    file: str                    # config.json | hf_quant_config.json | config.json:text_config
    quant_method: str = ""       # quant_method, lower-cased ("" when absent)
    producer: str = ""           # producer.name (ModelOpt writes "modelopt")
    quant_algo: str = ""         # quantization.quant_algo: ModelOpt's nested layout (hf_quant_config.json), upper-cased
    flat_quant_algo: str = ""    # top-level quant_algo: ModelOpt 0.31+ writes it into config.json, upper-cased
    legacy_modelopt: bool = False   # quantization.modelopt_quant_config (pre-0.29 ModelOpt)
    format: str = ""             # compressed-tensors "format" (pack-quantized, mxfp4-pack-quantized, ...)
    moe_quant_algo: str = ""     # DeepSeek-V4 ModelOpt exports: the routed experts' algorithm, upper-cased
    desc_act: bool = False       # GPTQ activation ordering with a group size (group_size > 0)
    # GPTQ/AWQ keys as written ("" when absent): engines convert to Marlin only when all are present and fit
    bits: str = ""               # "4", "8"
    group_size: str = ""         # "-1", "32", "128"
    sym: str = ""                # "yes" | "no"
    desc_act_key: str = ""       # "yes" | "no": desc_act given at all (SGLang's Marlin check needs the key)
    zero_point: str = ""         # AWQ: "yes" | "no"
    checkpoint_format: str = ""  # "marlin" when already Marlin-packed (checkpoint_format / is_marlin_format)
    kv_cache: str = ""           # the KV-cache quantization this block declares: fp8 | nvfp4 | other | ""


@dataclass(frozen=True)
class DeclaredQuant:
    """Every quantization declaration the checkpoint's config files hold, in file order, plus the
    model-level keys engines rewrite methods by."""

    declarations: tuple[QuantDeclaration, ...] = ()
    expert_dtype: str = ""       # config.json expert_dtype (DeepSeek-V4: fp4 | fp8)

    def in_file(self, file: str) -> QuantDeclaration | None:
        return next((d for d in self.declarations if d.file == file), None)


def _decl(file: str, q: dict) -> QuantDeclaration:
    nested = q.get("quantization")
    nested = nested if isinstance(nested, dict) else {}
    producer = q.get("producer")
    group = q.get("group_size")
    return QuantDeclaration(
        file=file,
        quant_method=str(q.get("quant_method") or "").lower(),
        producer=str(producer.get("name") or "") if isinstance(producer, dict) else "",
        quant_algo=str(nested.get("quant_algo") or "").upper(),
        flat_quant_algo=str(q.get("quant_algo") or "").upper(),
        legacy_modelopt="modelopt_quant_config" in nested,
        format=str(q.get("format") or ""),
        moe_quant_algo=str(q.get("moe_quant_algo") or "").upper(),
        desc_act=bool(q.get("desc_act")) and isinstance(group, int) and group > 0,
        bits=_key(q.get("bits")), group_size=_key(group if group is not None else nested.get("group_size")),
        sym=_key(q.get("sym")),
        desc_act_key=_key(q.get("desc_act")), zero_point=_key(q.get("zero_point")),
        checkpoint_format="marlin" if q.get("checkpoint_format") == "marlin" or q.get("is_marlin_format") is True
        else str(q.get("checkpoint_format") or ""),
        kv_cache=_kv(nested.get("kv_cache_scheme") or q.get("kv_cache_scheme") or nested.get("kv_cache_quant_algo")
                     or q.get("kv_cache_quant_algo")),
    )


def _kv(value) -> str:
    """ModelOpt's kv_cache_quant_algo string or a compressed-tensors-style kv_cache_scheme dict, named."""
    if isinstance(value, dict):
        if value.get("type") == "float" and value.get("num_bits") == 8 and value.get("dynamic") is False:
            return "fp8"
        if value.get("type") == "float" and value.get("num_bits") == 4:
            return "nvfp4"
        return "other"
    if isinstance(value, str) and value:
        low = value.lower()
        return "fp8" if low in ("fp8", "fp8_e4m3") else "nvfp4" if low == "nvfp4" else "other"
    return ""


def _key(v) -> str:
    """A config value as the gate compares it: booleans yes/no, numbers as written, absent ''."""
    if v is None:
        return ""
    if isinstance(v, bool):
        return "yes" if v else "no"
    return str(v)


def declared_quant(config: dict | None, hf_quant_config: dict | None) -> DeclaredQuant:
    """The declarations of config.json (top level, then text_config) and hf_quant_config.json."""
    decls = []
    config = config if isinstance(config, dict) else {}
    top = config.get("quantization_config")
    if isinstance(top, dict):
        decls.append(_decl("config.json", top))
    text = config.get("text_config")
    if isinstance(text, dict) and isinstance(text.get("quantization_config"), dict):
        decls.append(_decl("config.json:text_config", text["quantization_config"]))
    if isinstance(hf_quant_config, dict):
        decls.append(_decl("hf_quant_config.json", hf_quant_config))
    return DeclaredQuant(tuple(decls), expert_dtype=str(config.get("expert_dtype") or ""))
