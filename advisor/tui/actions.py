"""What the TUI's Launch, Bench, µbench and Export tabs run: the application layer (advisor.services),
the same functions the `launch`, `bench`, `microbench` and `report` commands call.

Every name here is a service's own, re-exported under the name the panes call; the panes may call
the services directly.
"""

from __future__ import annotations

from advisor import engines
from advisor.services.bench import agreement_doc, bench_doc
from advisor.services.export import export_shown as export_report
from advisor.services.launch.command import (
                                             command_from_line,
                                             demo_note,
                                             generated_command,
                                             launch_command_line,
                                             launch_note,
                                             untuned_tp,
)
from advisor.services.launch.profiles import (
                                             profile_command_line,
                                             profile_model,
                                             same_model,
                                             save_profile,
                                             saved_profiles,
)
from advisor.services.launch.server import (
                                             Launch,
                                             ReadyState,
                                             kernel_check_doc,
                                             line_style,
                                             server_url,
                                             start_server,
                                             stop_server,
                                             wait_ready,
)
from advisor.services.microbench import measured_doc as microbench_doc

__all__ = ("LAUNCH_ENGINES", "ReadyState", "untuned_tp", "generated_command", "launch_note", "demo_note",
           "launch_command_line", "command_from_line", "start_server", "Launch", "wait_ready", "kernel_check_doc",
           "line_style", "saved_profiles", "profile_model", "same_model", "profile_command_line", "stop_server",
           "server_url", "save_profile", "bench_doc", "agreement_doc", "microbench_doc", "export_report")

LAUNCH_ENGINES = engines.launchable()
