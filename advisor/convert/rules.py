"""Which tensors become NVFP4, which stay BF16, and which share one global scale.

ModelOpt decides this from the live model: it quantizes every nn.Linear whose quantizer is not
disabled by `default_disabled_quantizers.yaml` (nvidia-modelopt 0.47.0,
modelopt_recipes/configs/ptq/units/default_disabled_quantizers.yaml), and groups quantized
linears that read the same input tensor (`collect_shared_input_modules`,
modelopt/torch/export/unified_export_hf.py) so that they share `weight_scale_2`
(`preprocess_linear_fusion`, modelopt/torch/export/quant_utils.py). A converter without the
model class uses names instead: the keep patterns below mirror that YAML, and the fused-group
tables list the sibling projections that read the same hidden state in each architecture.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass

# ModelOpt 0.47 default-disabled quantizers, as module-name patterns ('*mlp.gate.*' on a
# quantizer name is '*mlp.gate' on the module name), plus nn.Embedding and the norms.
DEFAULT_KEEP: tuple[str, ...] = (
    "*lm_head*", "*embed_tokens*", "*embed*", "*norm*",
    "*block_sparse_moe.gate*", "*mlp.gate", "*mlp.shared_expert_gate", "*router*",
    "*conv1d*", "*linear_attn.in_proj_a*", "*linear_attn.in_proj_b*",
    "*output_layer*", "*proj_out", "mtp.*", "*.mtp.*", "output",
    "*embed_vision*", "*vision_tower*", "*visual*", "*vision_model*", "*multi_modal_projector*",
)


def module_of(tensor_name: str) -> str:
    return tensor_name.rsplit(".", 1)[0] if "." in tensor_name else ""


def matching_keep_pattern(module: str, patterns: tuple[str, ...]) -> str | None:
    for pat in patterns:
        if fnmatch.fnmatchcase(module, pat):
            return pat
    return None


@dataclass(frozen=True)
class FusedRule:
    """Sibling projections of one parent module that read the same input."""

    name: str
    parent: str                  # regex for the parent module name (suffix match)
    members: tuple[str, ...]     # child module names

    def key(self, module: str) -> str | None:
        """The group key (the parent module) when `module` is a member of this rule."""
        parent, _, child = module.rpartition(".")
        if child in self.members and re.search(self.parent + r"$", parent):
            return parent
        return None


ATTN_QKV = FusedRule("attention q/k/v", r"(^|\.)(self_attn|attn|attention|self_attention)",
                     ("q_proj", "k_proj", "v_proj"))
MLA_A = FusedRule("MLA q_a/kv_a", r"(^|\.)self_attn", ("q_a_proj", "kv_a_proj_with_mqa"))
GDN_IN = FusedRule("gated-delta-net in_proj", r"(^|\.)linear_attn",
                   ("in_proj_qkv", "in_proj_z", "in_proj_a", "in_proj_b"))
GDN_NEXT_IN = FusedRule("gated-delta-net in_proj (qwen3-next)", r"(^|\.)linear_attn",
                        ("in_proj_qkvz", "in_proj_ba"))
MLP_GATE_UP = FusedRule("MLP gate/up", r"(^|\.)(mlp|feed_forward|shared_expert|shared_experts)",
                        ("gate_proj", "up_proj"))
EXPERT_GATE_UP = FusedRule("MoE expert gate/up", r"\.experts\.\d+", ("gate_proj", "up_proj"))
EXPERT_W1_W3 = FusedRule("MoE expert w1/w3", r"\.experts\.\d+", ("w1", "w3"))

_DENSE = (ATTN_QKV, MLP_GATE_UP)
_MOE = (ATTN_QKV, MLP_GATE_UP, EXPERT_GATE_UP)
ARCH_TABLES: dict[str, tuple[FusedRule, ...]] = {
    "llama": _DENSE, "mistral": _DENSE, "qwen2": _DENSE, "qwen3": _DENSE, "gemma2": _DENSE,
    "gemma3_text": _DENSE, "phi3": _DENSE, "granite": _DENSE, "olmo2": _DENSE,
    "qwen2_moe": _MOE, "qwen3_moe": _MOE, "mixtral": (ATTN_QKV, EXPERT_W1_W3),
    "deepseek_v2": (MLA_A, ATTN_QKV, MLP_GATE_UP, EXPERT_GATE_UP),
    "deepseek_v3": (MLA_A, ATTN_QKV, MLP_GATE_UP, EXPERT_GATE_UP),
    "qwen3_next": (ATTN_QKV, GDN_NEXT_IN, MLP_GATE_UP, EXPERT_GATE_UP),
    "qwen3_5": (ATTN_QKV, GDN_IN, MLP_GATE_UP),
    "qwen3_5_text": (ATTN_QKV, GDN_IN, MLP_GATE_UP),
    "qwen3_5_moe": (ATTN_QKV, GDN_IN, MLP_GATE_UP, EXPERT_GATE_UP),
    "qwen3_5_moe_text": (ATTN_QKV, GDN_IN, MLP_GATE_UP, EXPERT_GATE_UP),
}
GENERIC_TABLE: tuple[FusedRule, ...] = (ATTN_QKV, MLA_A, GDN_IN, GDN_NEXT_IN, MLP_GATE_UP,
                                        EXPERT_GATE_UP, EXPERT_W1_W3)


def table_for(model_type: str | None) -> tuple[tuple[FusedRule, ...], str]:
    """The fused-group table and a one-line note on where it came from."""
    if model_type in ARCH_TABLES:
        return ARCH_TABLES[model_type], f"name table for model_type {model_type}"
    return GENERIC_TABLE, (f"generic name table (model_type {model_type or 'unknown'} has no table of its own;"
                           " check with --reference)")


def groups_from_table(modules: list[str], table: tuple[FusedRule, ...]) -> list[tuple[str, tuple[str, ...]]]:
    """(rule name, members) for each fused group among the quantized modules, members in input order.
    Modules in no group form groups of one."""
    keyed: dict[tuple[str, str], list[str]] = {}
    rule_of: dict[tuple[str, str], str] = {}
    for m in modules:
        for rule in table:
            parent = rule.key(m)
            if parent is not None:
                k = (rule.name, parent)
                keyed.setdefault(k, []).append(m)
                rule_of[k] = rule.name
                break
        else:
            keyed.setdefault(("", m), []).append(m)
            rule_of[("", m)] = ""
    return [(rule_of[k], tuple(v)) for k, v in keyed.items()]


def summarize_exclude_modules(unquantized: list[str], quantized: list[str]) -> list[str]:
    """ModelOpt's `_prefix_wildcard_summarize_exclude_modules` (quant_utils.py, 0.47.0): prefix
    wildcards cut at '.' that match no quantized module; sorted."""
    negative: set[str] = set()
    for layer in quantized:
        negative.add(layer)
        negative.update(layer[:i] + "*" for i in range(len(layer) + 1))
    summary: set[str] = set()
    for layer in unquantized:
        candidates: list[str] = []
        options = [[layer[:i] + "*"] if j == 0 else [layer[:i], layer[:i] + ".*"]
                   for i in range(len(layer)) if layer[i] == "." for j in (0, 1)]
        options.append([layer])
        for wildcards in options:
            if any(w in negative for w in wildcards):
                continue
            if all(w in summary for w in wildcards):
                candidates = []
                break
            candidates = wildcards
            break
        if len(candidates) == 2:
            a, b = sorted(candidates, key=len)
            summary.update([b] if b == a + ".*" else candidates)
        else:
            summary.update(candidates)
    return sorted(summary)
