"""Which speculative method a plan drafts with (the one asked for, else the checkpoint's MTP head, else
n-gram prompt lookup, shown only) and how it reads a measured --acceptance (as asked, else as the
engine prints it)."""

from __future__ import annotations

from advisor.cost import speculative
from advisor.cost.derived import Assumption
from advisor.cost.engine_profile import EngineMemory
from advisor.errors import BadInput, UsageError


def method_for(mtp_layers: int, engine: EngineMemory, name: str | None) -> tuple[speculative.SpecMethod | None, str]:
    """The method (None: the engine offers none that applies) and why it was chosen ("" when asked)."""
    method: speculative.SpecMethod | None = None
    note = ""
    if name is not None:
        if name not in speculative.METHODS:
            raise BadInput(f"unknown speculative method '{name}' (have: {', '.join(speculative.METHODS)})")
        if engine.spec_methods and name not in engine.spec_methods:
            raise BadInput(f"{engine.engine} does not offer speculative method '{name}' "
                           f"(has: {', '.join(engine.spec_methods)}; {engine.spec_source})")
        method = speculative.METHODS[name]
    elif mtp_layers > 0 and "mtp" in engine.spec_methods:
        method, note = speculative.METHODS["mtp"], "the checkpoint ships an MTP head"
    elif "ngram" in engine.spec_methods:
        method, note = speculative.METHODS["ngram"], ("no draft head in the checkpoint: n-gram prompt lookup, "
                                                      "shown only (its gain depends on the text; adopt it with "
                                                      "--spec-method ngram and measured --acceptance)")
    return method, note


def acceptance_kind(engine: EngineMemory, asked: str | None) -> tuple[str, str]:
    """How to read --acceptance: as asked, else as the engine prints it (vLLM and FastLLM print the
    unconditional share per position; SGLang prints only a mean length, read like vLLM's)."""
    if asked:
        if asked not in speculative.ACCEPTANCE_KINDS:
            raise UsageError(f"--acceptance-kind must be one of {', '.join(speculative.ACCEPTANCE_KINDS)} "
                             f"(got {asked!r})")
        return asked, "--acceptance-kind"
    printed = str(engine.acceptance.get("printed", "unconditional"))
    src = engine.acceptance.get("source", "")
    if printed in speculative.ACCEPTANCE_KINDS:
        return printed, f"{engine.engine} prints it so: {src}"
    return "unconditional", f"{engine.engine} prints no per-position rate ({src}); read as vLLM prints it"


def acceptance(engine: EngineMemory, method: speculative.SpecMethod | None, measured: tuple[float, ...],
               asked_kind: str | None) -> tuple[tuple[float, ...], list[Assumption]]:
    """The conditional acceptance per position from a measured --acceptance (empty: none given, the
    method's own curve applies), and the assumptions that state it and the draft head's quantization."""
    if any(not 0.0 <= a <= 1.0 for a in measured):
        raise BadInput("--acceptance values must lie in [0, 1]")
    kind, kind_src = acceptance_kind(engine, asked_kind)
    conditional = speculative.to_conditional(measured, kind)
    out: list[Assumption] = []
    if method is not None:
        shown = conditional or method.acceptance(4)
        out.append(Assumption(f"acceptance.{method.name}",
                              ",".join(f"{a:.3g}" for a in shown) + ("" if conditional else ",..."),
                              "per position, given the earlier ones accepted",
                              (f"--acceptance {','.join(f'{a:g}' for a in measured)} read as {kind} "
                               f"({kind_src}), converted a_i = u_i / u_(i-1)" if kind == "unconditional"
                               else f"--acceptance, conditional ({kind_src})") if measured else method.source))
    if method is not None and engine.draft_quant and method.name in (engine.draft_quant.get("methods") or ()):
        q = engine.draft_quant
        out.append(Assumption("draft_head_quant", f"{q['env']}={q['value']}", "",
                              f"the draft reads a {q.get('head_bits', 16):g}-bit copy of the output head "
                              f"(set on the launch line): {q.get('source', '')}"))
    return conditional, out
