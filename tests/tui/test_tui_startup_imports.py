"""What the TUI lists before its first paint (cards, engines and versions, demos, workloads) comes from
file names and the profile caches: neither pydantic nor yaml is imported for it once the caches are warm
(issue 23: the TUI imported the rule-file models just to list rule-file names)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from advisor.services import views
from tests.conftest import ROOT

LISTS = ("from advisor.services import views\n"
         "v = [views.gpu_choices(), views.engine_choices(), views.demo_names(), views.workload_names()]\n")


def test_the_pickers_lists_import_neither_pydantic_nor_yaml():
    code = LISTS + "import sys, json\nprint(json.dumps([v[1], 'pydantic' in sys.modules, 'yaml' in sys.modules]))"
    # The first fresh process warms the caches under this test's XDG_CACHE_HOME (warming them in this
    # process does nothing once an earlier test has filled its in-memory caches); the second is measured.
    for _ in range(2):
        proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=dict(os.environ), capture_output=True,
                              text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    engines, pydantic, yaml = json.loads(proc.stdout.strip().splitlines()[-1])
    assert [tuple(e) for e in engines] == list(views.engine_choices())
    assert {e[1].split("@")[0] for e in engines} == {"vllm", "sglang", "fastllm"}
    assert (pydantic, yaml) == (False, False)
