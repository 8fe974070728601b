"""The application layer: what the CLI (advisor/commands/) and the TUI (advisor/tui/) both run.

Each module is one job, written once for both front ends: ``analysis`` (inspect -> explain -> plan),
``launch`` (the serve command, its checks, the server's start, readiness, kernel check and stop,
saved profiles), ``bench`` (a server measured and judged against the plan), ``export`` (the report
file), ``microbench`` (this GPU measured, the calibration saved), and the renderer-neutral documents
both show (``views``, ``answer``).

Services import the core and launchers/ (which sit beside them), never the CLI, the TUI, Rich or
Textual; they return data and advisor.doc documents, and report progress through callbacks.
"""
