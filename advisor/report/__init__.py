"""Compatibility reports: one analysis (and a GPU x engine matrix) as Markdown, JSON or HTML.

    build.py     build_report(ReportInputs) -> Report(doc, data): the sections, from the core Docs
    matrix.py    compute_matrix(checkpoint, gpus, engines) -> Matrix: explain + make_plan per cell
    charts.py    decode vs batch, KV pool vs context, roofline (advisor.doc.Chart) from a Plan
    extras.py    optional sections: calibration, microbench, benchmark verdicts
    privacy.py   Scrubber: secrets, GPU UUIDs and host paths out of the Doc and the JSON
    output.py    render(report, fmt), schema_errors(data) (report.schema.json), atomic write
    export.py    make_report / export(ExportRequest, path): what the CLI command and the TUI call
    markdown.py, html.py, svg.py   the renderers (no scripts, no external assets)
"""
