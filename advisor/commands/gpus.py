"""`nvfp4-advisor gpus`: the GPU table (profiles/gpus.yaml), filterable by arch / cc / segment."""

from __future__ import annotations

import argparse

NAME = "gpus"
HELP = "list the GPU table: specs and dense tensor peaks per format (filter by --arch, --cc-min/--cc-max, --segment)"
ORDER = 20

# Peak columns shown to humans (JSON carries every key).
# FP16/FP8 with FP32 accumulate: the rate a GeForce card really gives most kernels.
_SHOWN = (("fp16_fp32acc", "FP16"), ("bf16", "BF16"), ("fp8_fp32acc", "FP8"), ("fp4", "FP4"),
          ("int8", "INT8"), ("int4", "INT4"))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--arch", metavar="ARCH", help="turing | ampere | ada | hopper | blackwell")
    parser.add_argument("--cc-min", metavar="X.Y", help="lowest compute capability (inclusive), e.g. 8.9")
    parser.add_argument("--cc-max", metavar="X.Y", help="highest compute capability (inclusive)")
    parser.add_argument("--segment", metavar="S", help="consumer | workstation | datacenter | embedded")


def _peak_cell(spec, key: str) -> str:
    from advisor.doc import na
    from advisor.gpu_spec import NOT_SUPPORTED

    value = spec.peaks.get(key)
    if value is NOT_SUPPORTED:
        return "n/s"
    text = na(value, fmt="{:g}")
    if value is not None and key in spec.derived_fields:
        text += "†"
    if value is not None and key in spec.halved_from_sparse:
        text += "‡"
    return text


def spec_json(spec) -> dict:
    """Every GpuSpec field; peaks keep "not-supported" (string) apart from null (unknown)."""
    import dataclasses

    from advisor.gpu_spec import NOT_SUPPORTED
    from advisor.jsonout import to_jsonable

    peaks = {k: ("not-supported" if v is NOT_SUPPORTED else v) for k, v in spec.peaks.items()}
    out = to_jsonable(dataclasses.replace(spec, peaks={}))
    out["peaks"] = peaks
    out["cc"] = spec.cc_str
    return out


def run(args):
    from advisor.commands import Outcome
    from advisor.doc import Block, Doc, Heading, Paragraph, Table, na
    from advisor.gpu_table import filter_gpus, load_sources
    from advisor.jsonout import document

    specs = filter_gpus(arch=args.arch, cc_min=args.cc_min, cc_max=args.cc_max, segment=args.segment)
    sources = load_sources()
    used = sorted({k for s in specs for k in s.sources})
    filters = {"arch": args.arch, "cc_min": args.cc_min, "cc_max": args.cc_max, "segment": args.segment}
    payload = {
        "filters": filters,
        "count": len(specs),
        "units": {"peaks": "dense TFLOPS (TOPS for int8/int4)", "memory_gb": "10^9 bytes",
                  "bandwidth_gbs": "10^9 B/s", "nvlink_gbs": "total bidirectional per GPU; null = no NVLink"},
        "gpus": [spec_json(s) for s in specs],
        "sources": {k: sources[k] for k in used},
    }

    spec_rows, peak_rows, styles = [], [], []
    for s in specs:
        mem = f"{s.memory_gb:g} GB {s.memory_type or ''}".strip() if s.memory_gb is not None else "N/A"
        spec_rows.append((s.id, s.name, s.cc_str, na(s.sm_count), mem, na(s.bandwidth_gbs, fmt="{:g}"),
                          na(s.l2_mb, fmt="{:g}"), na(s.tdp_w, fmt="{:g}"), s.confidence))
        peak_rows.append((s.id, *(_peak_cell(s, k) for k, _ in _SHOWN)))
        styles.append("dim" if s.confidence == "low" else "normal")
    active = ", ".join(f"{k.replace('_', '-')} {v}" for k, v in filters.items() if v is not None)
    suffix = f" ({active})" if active else ""
    blocks: list[Block] = [
        Heading("GPU table"),
        Table(columns=("ID", "Name", "CC", "SMs", "Memory", "GB/s", "L2 MB", "TDP W", "Conf."),
              rows=tuple(spec_rows), title=f"{len(specs)} GPUs{suffix}", row_styles=tuple(styles)),
        Table(columns=("ID", *(c for _, c in _SHOWN)), rows=tuple(peak_rows),
              title="Dense tensor peaks, TFLOPS (TOPS for INT8/INT4)", row_styles=tuple(styles)),
        Paragraph("FP16 and FP8 with FP32 accumulate (GeForce: half the FP16-accumulate rate). "
                  "† derived (SMs × per-SM rate × clock), ‡ halved from a sparse vendor figure, "
                  "n/s = the architecture lacks the format, N/A = unknown, dim rows = low confidence. "
                  "Every field, incl. accumulate variants, clocks, NVLink and sources: --json.", style="dim"),
    ]
    if not specs:
        blocks = [Heading("GPU table"), Paragraph("No GPU in the table matches these filters.", style="warn")]
    return Outcome(json=document("gpus", payload), doc=Doc(tuple(blocks)))
