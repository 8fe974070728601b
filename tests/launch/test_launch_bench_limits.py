"""`bench`'s flag ranges are the benchmark's own: the parser once allowed 1,000 shots and 10^7 tokens
that BenchConfig then refused with a different message."""

from __future__ import annotations

import pytest

from advisor.errors import UsageError
from launchers.bench import BenchConfig

LIMITS = {"--shots": ("shots", 1, 20), "--max-tokens": ("max_tokens", 1, 32768),
          "--concurrency": ("concurrency", 1, 512)}


@pytest.mark.parametrize("flag", list(LIMITS))
def test_parser_range_is_the_config_range(flag, capsys):
    from advisor.cli import main

    field, lo, hi = LIMITS[flag]
    BenchConfig(**{field: hi})                                  # the top of the range is a valid run
    with pytest.raises(UsageError):
        BenchConfig(**{field: hi + 1})
    try:
        rc = main(["bench", "--url", "http://127.0.0.1:9", flag, str(hi + 1)])
    except SystemExit as stop:                                   # argparse's usage error
        rc = stop.code
    err = capsys.readouterr().err
    assert rc == 2 and f"must be from {lo} to {hi}, got {hi + 1}" in err and err.count("\n") == 1
