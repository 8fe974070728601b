"""The Textual TUI: a thin view over the core (advisor.analysis & friends).

``create_app`` is the one factory used by the CLI and the tests.
"""

from __future__ import annotations


def create_app(**kwargs):
    from advisor.tui.app import AdvisorApp, make_app

    return make_app(**kwargs)


def run_app(**kwargs) -> int:
    import sys

    from advisor.errors import UsageError

    # Textual reads keys from stdin and draws on stderr: without both, the screen would wait forever.
    if not (sys.stdin.isatty() and sys.stderr.isatty()):
        raise UsageError("the TUI needs a terminal (stdin and stderr); for scripts use inspect, explain or plan")
    app = create_app(**kwargs)
    app.run()
    return app.return_code or 0
