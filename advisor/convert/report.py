"""Renderer-neutral documents and JSON payloads for conversion and verification results."""

from __future__ import annotations

from collections import Counter

from advisor.convert.converter import ConvertResult
from advisor.convert.verify import VerifyReport
from advisor.doc import Block, Bullets, Doc, Heading, KeyValues, Paragraph, Table

INPUT_SCALE_NOTE = ("input_scale is written as 1.0 (ModelOpt's constant_amax 2688): weight-only runtimes "
                    "(W4A16, e.g. Marlin) ignore it; a W4A4 runtime on FP4 tensor cores would use it to "
                    "scale activations, which a data-free converter cannot calibrate.")
PRODUCER_NOTE = ("hf_quant_config.json names producer modelopt 0.47.0: the layout and the arithmetic are "
                 "that version's, reproduced bit-exactly.")


STRUCTURE_SHOWN = 12       # name/dtype/shape lines shown on screen; --json has all


def _gb(n: int) -> str:
    """Bytes for people: GB (decimal, as disk sizes and --max-shard-size) above 1 GB, else MB/kB."""
    for unit, div in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= div:
            return f"{n / div:.2f} {unit}"
    return f"{n} B"


def _short(name: str) -> str:
    """On screen the common model prefix adds nothing (--json keeps full names)."""
    for p in ("model.language_model.", "model."):
        if name.startswith(p):
            return name[len(p):]
    return name


def convert_payload(r: ConvertResult) -> dict:
    p = r.plan
    return {
        "destination": str(r.destination),
        "source": str(p.source.root),
        "reference": str(p.reference.root) if p.reference else None,
        "quant_algo": p.hf_quant_config["quantization"]["quant_algo"],
        "quantized": [{"module": q.module, "shape": list(q.shape), "group": q.group, "rule": q.rule,
                       "input_scale": q.input_scale is not None} for q in p.quantized.values()],
        "kept": [{"tensor": k.name, "reason": k.reason} for k in p.kept],
        "fused_groups": {g: list(m) for g, m in p.groups.items() if len(m) > 1},
        "group_source": p.group_source,
        "input_bytes": r.input_bytes,
        "output_bytes": r.output_bytes,
        "seconds": r.seconds,
        "files": list(r.files),
        "notes": list(p.notes),
    }


def convert_doc(r: ConvertResult) -> Doc:
    p = r.plan
    algo = p.hf_quant_config["quantization"]["quant_algo"]
    fused = {g: m for g, m in p.groups.items() if len(m) > 1}
    rate = r.input_bytes / r.seconds / 1e9 if r.seconds > 0 else None
    blocks: list[Block] = [
        Heading(f"Converted to {algo} (ModelOpt layout)"),
        KeyValues((
            ("source", str(p.source.root)),
            ("destination", str(r.destination)),
            ("reference", str(p.reference.root) if p.reference else "none (name tables and keep patterns)"),
            ("quantized linears", str(len(p.quantized))),
            ("kept in original precision", str(len(p.kept))),
            ("fused groups", f"{len(fused)} ({p.group_source})"),
            ("size", f"{_gb(r.input_bytes)} -> {_gb(r.output_bytes)}"),
            ("time", f"{r.seconds:.1f} s" + (f" ({rate:.2f} GB/s of input)" if rate else "")),
            ("files", ", ".join(r.files)),
        )),
    ]
    if fused:
        rows = tuple((_short(g.split(":")[0]), ", ".join(x.rsplit(".", 1)[-1] for x in m), p.quantized[m[0]].rule)
                     for g, m in list(fused.items())[:12])
        title = "Fused groups sharing one weight_scale_2" + (f" (first 12 of {len(fused)})" if len(fused) > 12 else "")
        blocks.append(Table(("parent", "members", "rule"), rows, title=title))
    if p.kept:
        reasons = Counter(k.reason for k in p.kept)
        blocks.append(Bullets(tuple(f"{n} x {reason}" for reason, n in reasons.most_common()),
                              title="Kept in original precision"))
    notes = list(p.notes)
    if any(q.input_scale is not None for q in p.quantized.values()) and p.reference is None:
        notes.append(INPUT_SCALE_NOTE)
    if p.reference is None:
        notes.append(PRODUCER_NOTE)
    if notes:
        blocks.append(Bullets(tuple(notes), title="Notes", style="dim"))
    return Doc(tuple(blocks))


def verify_payload(rep: VerifyReport) -> dict:
    return {
        "mode": rep.mode, "candidate": rep.candidate, "reference": rep.reference,
        "identical": rep.identical, "tensors_compared": rep.tensors_compared,
        "bytes_compared": rep.bytes_compared, "structure": list(rep.structure),
        "mismatches": [{"tensor": d.name, "kind": d.kind, "differing_bytes": d.differing_bytes,
                        "total_bytes": d.total_bytes, "first_positions": [list(x) for x in d.first_positions],
                        "fails": d.fails, "note": d.note} for d in rep.diffs],
        "undetermined_blocks": rep.undetermined_blocks,
        "notes": list(rep.notes),
    }


def _positions_text(first: tuple[tuple[int, ...], ...]) -> str:
    if not first:
        return "-"                      # not tracked (e.g. undetermined blocks)
    if all(x == () for x in first):
        return "scalar"
    return " ".join(",".join(map(str, x)) for x in first)


def verify_doc(rep: VerifyReport) -> Doc:
    verdict = ("identical: every compared byte matches" if rep.identical
               else "DIFFERENT: see the mismatches below")
    blocks: list[Block] = [
        Heading(f"Verify ({rep.mode})"),
        KeyValues((
            ("candidate", "reference, dequantized and requantized" if not rep.candidate else
             rep.candidate + (" (converted in a temporary folder, not kept)" if rep.mode == "convert+compare" else "")),
            ("reference", rep.reference),
            ("tensors compared", str(rep.tensors_compared)),
            ("bytes compared", _gb(rep.bytes_compared)),
        )),
        Paragraph(verdict, "good" if rep.identical else "bad"),
    ]
    if rep.structure:
        items = rep.structure[:STRUCTURE_SHOWN]
        if len(rep.structure) > STRUCTURE_SHOWN:
            items += (f"... and {len(rep.structure) - STRUCTURE_SHOWN} more (all of them in --json)",)
        blocks.append(Bullets(items, title="Names, dtypes, shapes, shards, configs", style="bad"))
    if rep.diffs:
        # the note is per kind, not per tensor: shown once below the table, marked with *
        rows = tuple((d.name, d.kind + ("*" if d.note else ""), f"{d.differing_bytes}/{d.total_bytes}",
                      _positions_text(d.first_positions)) for d in rep.diffs[:40])
        styles = tuple("bad" if d.fails else "dim" for d in rep.diffs[:40])
        title = "Differing tensors" + (f" (first 40 of {len(rep.diffs)})" if len(rep.diffs) > 40 else "")
        blocks.append(Table(("tensor", "kind", "bytes differing", "first positions"), rows,
                            title=title, row_styles=styles))
        kind_notes = dict.fromkeys(f"{d.kind}*: {d.note}" + ("" if d.fails else " (does not fail the check)")
                                   for d in rep.diffs if d.note)
        if kind_notes:
            blocks.append(Bullets(tuple(kind_notes), style="dim"))
    if rep.notes:
        blocks.append(Bullets(rep.notes, title="Notes", style="dim"))
    return Doc(tuple(blocks))
