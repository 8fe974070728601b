"""Compare what vLLM chose (a cached harness row) with what `explain` says, one (layer class, role) at a time.

A vLLM module is put in the advisor's terms by the advisor's own role classifier (advisor.checkpoint.roles),
so a row is (config, GPU, install, layer class, role). Kernel names are compared as vLLM logs them:
the dense kernel class (or the quant method when the layer has no kernel object, e.g.
UnquantizedLinearMethod), the MoE backend and experts class, the attention backend. The config-loading
stage is a row of its own: the method vLLM resolves, its refusal message, or its building every layer
unquantized.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from advisor.checkpoint.roles import role_of
from advisor.kernel_path.explain import ROLE_CLASS
from advisor.kernel_path.model import Explanation
from advisor.kernel_path.options import InstallOptions

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True)
class Row:
    key: str                  # config|sm_NN|install
    layer_class: str          # dense_linear | moe_experts | attention_kv | lm_head_embed | model
    role: str
    vllm: tuple[str, ...]     # what vLLM chose (sorted)
    advisor: tuple[str, ...]  # what explain says (sorted)
    agree: bool
    detail: str = ""


@dataclass
class Comparison:
    rows: list[Row] = field(default_factory=list)
    uncovered: list[str] = field(default_factory=list)    # what could not be compared, and why

    @property
    def differences(self) -> list[Row]:
        return [r for r in self.rows if not r.agree]


def install_options(row: dict) -> InstallOptions:
    """explain's install facts for a harness row: exactly what vLLM's own probes reported."""
    f = row["install"]
    return InstallOptions(flashinfer=f["flashinfer"], flashinfer_cubin=f["flashinfer"], nvcc_ninja=False,
                          deepgemm=f["deepgemm"], humming=f["humming"], b12x=f["b12x"],
                          triton_kernels=f["triton_kernels"])


def vllm_kernel(entry: dict) -> str:
    if entry["kind"] == "linear":
        return entry["kernels"][0] if entry.get("kernels") else entry.get("quant_method") or "?"
    if entry["kind"] == "moe":
        backend = entry.get("backend") or entry.get("quant_method") or "?"
        return f"{backend} ({entry['experts_cls']})" if entry.get("experts_cls") else backend
    return entry.get("backend") or "?"


def advisor_kernel(kernel: str | None, layer_class: str) -> str:
    """'MARLIN (MarlinExperts, INT8 activations)' -> 'MARLIN (MarlinExperts)'; 'FLASH_ATTN (FA4)' ->
    'FLASH_ATTN'; 'UnquantizedLinearMethod (cuBLAS)' -> 'UnquantizedLinearMethod'."""
    if not kernel:
        return "(none)"
    head, _, rest = kernel.partition(" (")
    if layer_class == "moe_experts" and rest:
        inner = _IDENT.match(rest)
        if inner and inner.group(0)[0].isupper() and not inner.group(0).isupper():
            return f"{head} ({inner.group(0)})"
    return head


def _match(v: str, a: str) -> bool:
    """Equal names; an advisor MoE entry without an experts class matches on the backend alone."""
    if v == a:
        return True
    return "(" not in a and v.split(" (")[0] == a


def _roles_vllm(result: dict) -> dict[tuple[str, str], set[str]]:
    out: dict[tuple[str, str], set[str]] = {}
    for e in result.get("layers", []):
        if e["kind"] == "attention":
            if role_of(e["module"]) == "vision":
                continue            # the vision encoder's attention (MMEncoderAttention): not a KV cache
            key = ("attention_kv", "attention")
        elif e["kind"] == "moe":
            key = ("moe_experts", "expert")
        else:
            role = role_of(e["module"])
            cls = ROLE_CLASS.get(role)
            if cls is None:
                continue
            key = (cls, role)
        out.setdefault(key, set()).add(vllm_kernel(e))
    return out


def _roles_advisor(exp: Explanation) -> dict[tuple[str, str], set[str]]:
    out: dict[tuple[str, str], set[str]] = {}
    for d in exp.decisions:
        roles = ("attention",) if d.layer_class == "attention_kv" else d.roles
        for role in roles:
            out.setdefault((d.layer_class, role), set()).add(advisor_kernel(d.kernel, d.layer_class))
    return out


def compare_row(key: str, row: dict, exp: Explanation, comp: Comparison, *, label: str) -> None:
    """Append the rows of one (config, GPU, install) to COMP."""
    r = row["result"]
    load = exp.load
    stage = r.get("stage")
    if stage in ("config", "vllm_config") and r.get("error"):
        if _unmodelled(r["error"]):
            comp.uncovered.append(f"{key}: vLLM stops before quantization ({r['error'][:140]})")
            return
        adv = [load.error] if load is not None and load.refused and load.error else sorted(
            {d.error or "" for d in exp.decisions if not d.runs})
        ok = any(_same_message(r["error"], a) for a in adv)
        comp.rows.append(Row(key, "model", "refusal", (r["error"][:200],), tuple(a[:200] for a in adv), ok,
                             f"vLLM refuses at {r.get('error_at')}"))
        return
    method = r.get("quantization")
    adv_method = load.method if load is not None else None
    unq = load is not None and load.outcome == "unquantized"
    quantized = label not in ("BF16", "FP16")
    want_unq = method is None and quantized
    ok = (method == adv_method) and (unq == want_unq) and not (load is not None and load.refused)
    comp.rows.append(Row(key, "model", "method", (str(method),),
                         (f"{adv_method} ({load.outcome})" if load is not None else "(not modelled)",), ok))
    if stage != "built":
        err = r.get("error", "")
        if _harness_limit(err):
            comp.uncovered.append(f"{key}: the harness could not build the model ({err[:140]})")
            return
        # vLLM raised while building a layer (an attention backend refusing the KV dtype, ...): explain must
        # say that layer does not run, with vLLM's words
        adv = sorted({d.error or "" for d in exp.decisions if not d.runs})
        comp.rows.append(Row(key, "model", "build-error", (err[:200],), tuple(a[:200] for a in adv),
                             any(_same_message(err, a) for a in adv), f"vLLM raises at {r.get('error_at')}"))
        return
    v_roles, a_roles = _roles_vllm(r), _roles_advisor(exp)
    for k in sorted(set(v_roles) | set(a_roles)):
        if k[1] in _UNMATCHED_ROLES:
            comp.uncovered.append(f"{key}: {k[0]}/{k[1]} modules are not matched by name")
            continue
        if k not in v_roles or k not in a_roles:
            side = "vLLM" if k in v_roles else "explain"
            comp.uncovered.append(f"{key}: {k[0]}/{k[1]} only in {side}'s module names")
            continue
        v, a = sorted(v_roles[k]), sorted(a_roles[k])
        ok = len(v) == len(a) and all(any(_match(x, y) for y in a) for x in v) and \
            all(any(_match(x, y) for x in v) for y in a)
        comp.rows.append(Row(key, k[0], k[1], tuple(v), tuple(a), ok))


# Roles that gather unlike modules (indexers, latent projections, MTP heads): a kernel per role means nothing.
_UNMATCHED_ROLES = ("other", "mtp")


# vLLM stops for reasons outside quantization that the advisor does not model: the architecture.
_UNMODELLED = ("does not recognize this architecture", "are not supported for now", "contains custom code",
               "trust_remote_code")


# Failures of the harness itself (a compiled kernel called while building): nothing to compare.
_HARNESS = ("the CPU harness cannot run it", "no answer within",
            "WorkspaceManager not initialized")        # a backend that sizes its GPU workspace while building


def _harness_limit(err: str) -> bool:
    return any(s in err for s in _HARNESS)


def _unmodelled(err: str) -> bool:
    return any(s in err for s in _UNMODELLED)


def _same_message(vllm_err: str, advisor_err: str) -> bool:
    """vLLM's message and the rule's text agree on their words up to the first placeholder ('...')."""
    v = re.sub(r"^\w+Error: ", "", vllm_err).strip()
    a = advisor_err.split("[...]")[0].split("...")[0].strip()
    return bool(a) and v.startswith(a[: max(20, min(len(a), 60))])
