"""Engine rule files (profiles/engines/<engine>-<version>.yaml): the schema.

A rule file is data: ordered candidate lists per (layer class, scheme) with gates, the MMA class
each candidate issues, where dequantization happens, warnings with their meaning and sources. A
candidate whose engine switches kernels by the number of rows M lists them in ``rows`` (bands below
a threshold, each with its kernel, MMA, dequant location and source line).
Loading (advisor.kernel_path.rule_files) validates every key (unknown keys are errors) and reports the
file on failure, then returns the validated file as advisor.kernel_path.rule_records (the same class
and attribute names, without pydantic). One model per YAML construct, all in this module: the whole
format reads in one place (which is why it runs past 400 lines).
"""

from __future__ import annotations

import re
from typing import Any, Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from advisor.checkpoint.model import SCHEMES
from advisor.kernel_path.model import LAYER_CLASSES, MMA_CLASSES
from advisor.kernel_path.options import DEPENDENCY_FACTS
from advisor.kernel_path.rule_records import GATE_SCOPE_KEYS, MmaSpec
from advisor.kernel_path.rule_versions import ENGINES

DEQUANT = ("none", "registers", "memory", "cpu")
# Activation dtypes a candidate may declare; "act16" = the model's 16-bit dtype (fp16 on Turing).
ACTIVATIONS = ("act16", "bf16", "fp16", "fp8_e4m3", "nvfp4", "mxfp4", "mxfp8", "int8", "fp32")
# Attention paths use KV dtypes as their "scheme".
KV_SCHEMES = ("auto", "bf16", "fp16", "fp8", "fp8_e4m3", "fp8_e5m2", "nvfp4", "fp4", "mxfp8")

_SM_KEY = re.compile(r"^(default|\d{2,3}|\d{2,3}-\d{2,3})$")


class _Strict(BaseModel):
    # defer_build: the validators are built on the first validation, which a cached rule file
    # (advisor.profile_cache) never needs
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


class ModelExclusion(_Strict):
    model_type: str
    sm_min: int = 0
    sm_max: int = 999




class Gate(_Strict):
    """One condition. Exactly one condition key per gate; `why` explains it in plain words.

    ``if_*`` keys scope the gate: it is checked only when they hold (e.g. an FP8-KV-only gate).
    The fields are the rule-file schema; what each condition checks and how a passed one reads is
    registered under the same key in advisor.kernel_path.gates.
    """

    sm_min: Optional[int] = None
    sm_max: Optional[int] = None
    sm_in: Optional[list[int]] = None
    sm_not_in: Optional[list[int]] = None
    family_in: Optional[list[int]] = None          # cc major: 10 = sm_100..109
    family_not_in: Optional[list[int]] = None
    requires: Optional[str] = None                 # a dependency declared in the file
    lacks: Optional[str] = None                    # that dependency is NOT available (engines that select a
                                                   # kernel without checking, then fail when it runs)
    env_in: Optional[dict[str, list[str]]] = None          # value (or default) must be listed
    env_not_in: Optional[dict[str, list[str]]] = None
    flag_in: Optional[dict[str, list[str]]] = None         # engine flag value (or default)
    flag_not_in: Optional[dict[str, list[str]]] = None
    producer_in: Optional[list[str]] = None
    producer_not_in: Optional[list[str]] = None
    quant_method_in: Optional[list[str]] = None        # the config's quant_method / quant_algo (upper-cased)
    quant_method_not_in: Optional[list[str]] = None
    weight_format_in: Optional[list[str]] = None
    weight_granularity_in: Optional[list[str]] = None
    act_format_in: Optional[list[str]] = None
    act_granularity_in: Optional[list[str]] = None
    act_dynamic: Optional[bool] = None
    group_size_in: Optional[list[int]] = None      # -1 = per-channel / no group
    block_in: Optional[list[list[int]]] = None
    symmetric: Optional[bool] = None
    act_order: Optional[bool] = None               # GPTQ group activation ordering (desc_act with groups)
    shape_multiple: Optional[dict[Literal["n", "k"], int]] = None
    # any one of these tile families fits (Marlin: N%128 and K%64, or N%64 and K%128); per-GPU shape
    shape_multiple_any: Optional[list[dict[Literal["n", "k"], int]]] = None
    model_type_in: Optional[list[str]] = None
    role_in: Optional[list[str]] = None            # checkpoint roles of the layer group (router, expert, ...)
    model_exclusions: Optional[list[ModelExclusion]] = None
    tp_max: Optional[int] = None
    tp_min: Optional[int] = None
    ep_min: Optional[int] = None
    ep_max: Optional[int] = None                   # e.g. a kernel that refuses expert parallel
    kv_dtype_in: Optional[list[str]] = None
    head_dim_not_in: Optional[list[int]] = None
    head_dim_in: Optional[list[int]] = None         # head sizes a backend supports
    mla: Optional[bool] = None
    attention_sinks: Optional[bool] = None
    never: Optional[str] = None                    # always rejects (opt-in / other-mode kernels)
    # facts of the engine's config-loading stage (LOAD_FACTS): each listed value set must hold
    config_in: Optional[dict[str, list[str]]] = None
    config_not_in: Optional[dict[str, list[str]]] = None
    # scope
    if_sm_min: Optional[int] = None
    if_sm_max: Optional[int] = None
    if_family_in: Optional[list[int]] = None
    if_kv_dtype_in: Optional[list[str]] = None
    why: str = ""

    @model_validator(mode="after")
    def _one_condition(self):
        set_keys = self._set_conditions()
        if len(set_keys) != 1:
            raise ValueError(f"a gate holds exactly one condition, got {set_keys or 'none'}")
        return self

    @classmethod
    def condition_keys(cls) -> list[str]:
        """The condition keys a gate may hold, in schema order."""
        return [k for k in cls.model_fields if k not in GATE_SCOPE_KEYS]

    def _set_conditions(self) -> list[str]:
        return [k for k in self.condition_keys() if getattr(self, k) is not None]

    @property
    def condition(self) -> str:
        """The one condition key this gate holds."""
        return next(k for k in self.condition_keys() if getattr(self, k) is not None)


class Warn(_Strict):
    text: str = Field(min_length=1)     # exactly what the engine prints
    meaning: str = Field(min_length=1)  # what it really means
    source: str = Field(min_length=1)


class Failure(_Strict):
    """What the engine says when it refuses or crashes, what it means, and what to do."""

    text: str = Field(min_length=1)
    meaning: str = Field(min_length=1)
    remedy: str = ""
    source: str = Field(min_length=1)


class Crash(Failure):
    when: list[Gate] = Field(min_length=1)   # all hold: the chosen kernel fails at run time


class Refusal(Failure):
    unless: list[Gate] = Field(min_length=1)  # any fails: the engine refuses before kernel choice


def _check_mma(v: MmaSpec) -> MmaSpec:
    items = v.items() if isinstance(v, dict) else [("default", v)]
    for key, cls_name in items:
        if not _SM_KEY.match(key):
            raise ValueError(f"mma key {key!r} must be 'default', 'NN' or 'NN-MM' (sm numbers)")
        if cls_name not in MMA_CLASSES:
            raise ValueError(f"mma class {cls_name!r} not one of MMA_CLASSES")
    return v


class RowRange(_Strict):
    """The kernel a candidate runs for a band of rows M (tokens in one GEMM call). A candidate's ``rows``
    list is ordered by ``below``; the last band has no ``below`` and serves every larger M."""

    below: Optional[int] = Field(default=None, ge=2)   # this band serves M < below
    kernel: str = Field(min_length=1)
    mma: MmaSpec
    dequant: Literal["none", "registers", "memory", "cpu"]
    source: str = Field(min_length=1)      # path:line@version of the threshold and the kernel
    note: str = ""
    launch_rows: list[int] = []            # GEMV: rows per launch, largest first; each launch re-reads the weights
    single_launch_max: int = 0             # up to this many rows a single launch serves them all
    read_bytes_per_element: Optional[float] = Field(default=None, gt=0)   # the layout the kernel reads, when the
                                           # engine keeps weights in another layout than the checkpoint's

    @field_validator("mma")
    @classmethod
    def _mma(cls, v: MmaSpec) -> MmaSpec:
        return _check_mma(v)


class Candidate(_Strict):
    kernel: str = Field(min_length=1)
    backend: Optional[str] = None          # value of the path's backend flag that selects it
    opt_in: bool = False                   # only used when the backend flag asks for it
    gates: list[Gate] = []
    mma: MmaSpec
    dequant: Literal["none", "registers", "memory", "cpu"]
    activation: str
    effective_scheme: Optional[str] = None  # None: as the checkpoint declares
    note: str = ""                          # why this kernel, in plain words, when it wins
    warnings: list[Warn] = []
    crash: Optional[Crash] = None
    source: str = Field(min_length=1)
    rows: list[RowRange] = []               # the kernel by number of rows M (empty: the fields above at every M)

    @field_validator("rows")
    @classmethod
    def _rows(cls, v: list[RowRange]) -> list[RowRange]:
        if not v:
            return v
        bounds = [r.below for r in v[:-1] if r.below is not None]
        if v[-1].below is not None or len(bounds) != len(v) - 1:
            raise ValueError("rows: every band but the last has 'below'; the last has none")
        if any(a >= b for a, b in zip(bounds, bounds[1:])):
            raise ValueError("rows: 'below' must increase")
        return v

    @field_validator("activation")
    @classmethod
    def _act(cls, v: str) -> str:
        if v not in ACTIVATIONS:
            raise ValueError(f"activation {v!r} not one of {ACTIVATIONS}")
        return v

    @field_validator("mma")
    @classmethod
    def _mma(cls, v: MmaSpec) -> MmaSpec:
        return _check_mma(v)

    @field_validator("effective_scheme")
    @classmethod
    def _eff(cls, v: Optional[str]) -> Optional[str]:
        if v is not None and v not in SCHEMES and not v.startswith("KV "):
            raise ValueError(f"effective_scheme {v!r} not one of SCHEMES")
        return v


class Downgrade(_Strict):
    """A scheme-level rewrite before kernel choice (e.g. W8A8-FP8 -> W8A16-FP8 below sm_89)."""

    id: str
    layer_classes: list[str]
    from_scheme: str
    to_scheme: str
    when: list[Gate] = Field(min_length=1)
    reason: str = Field(min_length=1)
    warnings: list[Warn] = []
    source: str = Field(min_length=1)


class PathRule(_Strict):
    id: str
    layer_class: str
    schemes: list[str] = Field(min_length=1)
    when: list[Gate] = []                    # extra match conditions (producer, granularity, arch)
    backend_flag: Optional[str] = None       # e.g. linear_backend
    forced_unsupported: Literal["fallback", "error"] = "error"
    disable_env: Optional[str] = None        # env var listing disabled kernel names
    refusals: list[Refusal] = []
    candidates: list[Candidate] = Field(min_length=1)
    none_error: Failure
    note: str = ""

    @field_validator("layer_class")
    @classmethod
    def _lc(cls, v: str) -> str:
        if v not in LAYER_CLASSES:
            raise ValueError(f"layer_class {v!r} not one of {LAYER_CLASSES}")
        return v


class Dependency(_Strict):
    label: str
    installed: list[str] = Field(min_length=1)   # InstallOptions facts that must all hold
    usable_if_any: list[str] = []                # one of these must hold too (else disabled)
    missing: str = Field(min_length=1)           # reason when not installed
    disabled: str = ""                           # reason when installed but unusable
    disabled_warning: Optional[Warn] = None      # what the engine prints when it disables it

    @model_validator(mode="after")
    def _facts(self):
        for f in self.installed + self.usable_if_any:
            if f not in DEPENDENCY_FACTS:
                raise ValueError(f"unknown install fact {f!r}; known: {DEPENDENCY_FACTS}")
        if self.usable_if_any and not self.disabled:
            raise ValueError("usable_if_any needs a 'disabled' reason")
        return self


# What the config-loading stage knows about a checkpoint (Gate config_in / config_not_in keys): the file the
# engine reads and that file's declaration (advisor.checkpoint.declared), the model's architecture, and the
# engine's resolved method (on per-layer paths).
LOAD_FACTS = ("file", "quant_method", "producer", "quant_algo", "flat_quant_algo", "legacy_modelopt", "format",
              "moe_quant_algo", "desc_act", "model_type", "architecture", "expert_dtype", "method",
              # GPTQ/AWQ keys as written (SGLang converts to Marlin only when all are given and fit)
              "bits", "group_size", "sym", "desc_act_key", "zero_point", "checkpoint_format")


class LoadStep(_Strict):
    """One way the engine resolves its quantization method while reading the config. Steps are tried in
    order; the first whose ``when`` holds decides: ``method`` ("" = none, every layer unquantized;
    "{declared}" = the declared quant_method through ``aliases``), or ``refuse`` (the engine raises)."""

    method: str = ""
    when: list[Gate] = []
    refuse: Optional[Failure] = None
    # the refusal comes from the model loader, after the engine's start-up checks: a global refusal that
    # holds on this GPU and install is what the user sees first
    at_load: bool = False
    note: str = Field(min_length=1)
    source: str = Field(min_length=1)


class LoadMethod(_Strict):
    config_class: str = Field(min_length=1)
    min_capability: int = 0
    act_dtypes: list[Literal["bf16", "fp16", "fp32"]] = Field(min_length=1)
    source: str = Field(min_length=1)


class ConfigLoading(_Strict):
    """The engine's config-loading stage, before any layer rule: which file it reads, how it resolves the
    quantization method (normaliser, overrides, per-model rewrites), and the model-wide refusals."""

    files: list[str] = Field(min_length=1)    # where the engine looks, first found wins
    files_source: str = Field(min_length=1)
    steps: list[LoadStep] = Field(min_length=1)
    aliases: dict[str, str] = {}              # declared quant_method -> the engine's method name
    methods: dict[str, LoadMethod] = Field(min_length=1)
    unknown_method: Failure                   # {method}: a method the engine does not know
    min_capability: Failure                   # {method} {min} {sm}
    act_dtype: Failure                        # {method} {dtype} {dtypes}
    unquantized: Failure                      # quantized weights, no method: built unquantized

    @model_validator(mode="after")
    def _methods(self):
        for st in self.steps:
            if st.refuse is None and st.method not in ("", "{declared}") and st.method not in self.methods:
                raise ValueError(f"config_loading step method {st.method!r} not in methods")
        for src, dst in self.aliases.items():
            if dst not in self.methods:
                raise ValueError(f"config_loading alias {src!r} -> {dst!r} not in methods")
        return self


class FlagSpec(_Strict):
    cli: str
    values: list[str] = Field(min_length=1)
    default: str


class RuleFile(_Strict):
    templates: dict[str, Any] = {}          # YAML anchors reused below; not read as rules
    engine: str                             # one of the registry's tuned engines (advisor.engines)
    version: str
    display_name: str
    source_ref: str = Field(min_length=1)   # what was read: release, commit
    env_defaults: dict[str, str] = {}
    flags: dict[str, FlagSpec] = {}
    kv_cache_dtypes: list[str] = Field(min_length=1)
    kv_default: str = "auto"
    kv_from_checkpoint: list[str] = []      # producers whose declared KV quant "auto" resolves to
    kv_from_checkpoint_source: str = ""
    # declared KV quant -> the engine's dtype name 'auto' resolves it to; a declared kind missing here
    # (when the map is given) is not picked up by 'auto'
    kv_from_checkpoint_names: dict[str, str] = {}
    act16_turing: str = ""                  # why activations are FP16 on sm_75
    act16_turing_warning: Optional[Warn] = None   # what the engine prints when it falls back to FP16
    activation_dtype: Optional[str] = None  # engine forces this 16-bit dtype (FastLLM: fp16)
    dependencies: dict[str, Dependency] = {}
    global_refusals: list[Refusal] = []     # checked before every path (e.g. arch not built)
    config_loading: Optional[ConfigLoading] = None   # the model-wide stage before any path (None: not modelled)
    # what a default `pip install` of this engine version brings: fact -> true/false, or the name of another
    # fact it follows (b12x ships in the FlashInfer wheel)
    default_install: dict[str, Union[bool, str]] = {}
    default_install_note: str = ""
    downgrades: list[Downgrade] = []
    paths: list[PathRule] = Field(min_length=1)

    @field_validator("engine")
    @classmethod
    def _tuned_engine(cls, v: str) -> str:
        if v not in ENGINES:
            raise ValueError(f"engine must be one of {', '.join(ENGINES)} (advisor.engines' tuned engines)")
        return v

    @model_validator(mode="after")
    def _refs(self):
        shared = [g for r in self.global_refusals for g in r.unless] + [g for d in self.downgrades for g in d.when]
        if self.config_loading is not None:
            shared += [g for st in self.config_loading.steps for g in st.when]
        for fact, value in self.default_install.items():
            for f in (fact, value) if isinstance(value, str) else (fact,):
                if f not in DEPENDENCY_FACTS:
                    raise ValueError(f"default_install: unknown install fact {f!r}; known: {DEPENDENCY_FACTS}")
        self._check_gates("file", shared)
        for p in self.paths:
            if p.backend_flag and p.backend_flag not in self.flags:
                raise ValueError(f"path {p.id}: backend_flag {p.backend_flag!r} not declared in flags")
            for s in p.schemes:
                if p.layer_class == "attention_kv":
                    if s not in self.kv_cache_dtypes and s not in KV_SCHEMES:
                        raise ValueError(f"path {p.id}: KV scheme {s!r} unknown")
                elif s not in SCHEMES:
                    raise ValueError(f"path {p.id}: scheme {s!r} not one of SCHEMES")
            gates = list(p.when) + [g for r in p.refusals for g in r.unless]
            for c in p.candidates:
                gates += c.gates + (c.crash.when if c.crash else [])
                if c.backend and p.backend_flag and c.backend not in self.flags[p.backend_flag].values:
                    raise ValueError(f"path {p.id}: {c.kernel} backend {c.backend!r} not a value of "
                                     f"--{p.backend_flag}")
            self._check_gates(f"path {p.id}", gates)
        ids = [p.id for p in self.paths]
        if len(ids) != len(set(ids)):
            raise ValueError("path ids must be unique")
        return self

    def _check_gates(self, where: str, gates: list[Gate]) -> None:
        for g in gates:
            if g.requires and g.requires not in self.dependencies:
                raise ValueError(f"{where}: requires {g.requires!r} not declared in dependencies")
            if g.lacks and g.lacks not in self.dependencies:
                raise ValueError(f"{where}: lacks {g.lacks!r} not declared in dependencies")
            for name in list((g.flag_in or {}).keys()) + list((g.flag_not_in or {}).keys()):
                if name not in self.flags:
                    raise ValueError(f"{where}: flag {name!r} not declared in flags")
            for name in list((g.config_in or {}).keys()) + list((g.config_not_in or {}).keys()):
                if name not in LOAD_FACTS:
                    raise ValueError(f"{where}: config fact {name!r} not one of {LOAD_FACTS}")
