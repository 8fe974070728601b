"""Header fuzzing with the official reader as the oracle: 20,000 seeded files, valid and mutated.

For each file, ``safetensors.deserialize`` (the Rust reader every engine loads with) accepts or
refuses; our reader must do the same, and when both accept, list the same tensors with the same
dtypes, shapes and offsets. The only allowed difference is our own limit on the rank (> 64). Counted
and required to be zero: tracebacks (any exception but BadInput), disagreements, lost or altered
tensors, and hangs (a case slower than 5 s).
"""

from __future__ import annotations

import io
import time

import pytest

from advisor.checkpoint.safetensors_header import MAX_RANK, parse_header
from advisor.errors import BadInput
from reliability_header_mutations import cases

safetensors = pytest.importorskip("safetensors")

CASES = 20_000


def official(blob: bytes):
    try:
        return {name: (t["dtype"], list(t["shape"]), len(t["data"])) for name, t in safetensors.deserialize(blob)}
    except Exception:  # noqa: BLE001 - SafetensorError and friends: refused
        return None


def ours(blob: bytes):
    h = parse_header(io.BytesIO(blob), len(blob), "fuzz.safetensors")
    return {name: (t.dtype, list(t.shape), t.nbytes) for name, t in h.tensors.items()}


def _over_rank_limit(blob: bytes) -> bool:
    """The official reader accepted it: does a tensor exceed our rank limit?"""
    return any(len(shape) > MAX_RANK for _, shape, _ in (official(blob) or {}).values())


@pytest.mark.timeout(600)
def test_header_reader_agrees_with_the_official_reader():
    tracebacks, disagree, lost, slow = [], [], [], []
    accepted = refused = 0
    for i, blob in enumerate(cases(seed=21, count=CASES)):
        want = official(blob)
        t0 = time.perf_counter()
        try:
            got = ours(blob)
        except BadInput as err:
            got = None
            assert "\n" not in str(err) and str(err).startswith("fuzz.safetensors: ")
        except Exception as err:  # noqa: BLE001 - the thing this suite counts
            tracebacks.append((i, repr(err), blob[:300]))
            continue
        if time.perf_counter() - t0 > 5.0:           # a hang: every case is a header of < 2 KB
            slow.append(i)
        if (want is None) != (got is None):
            if not (got is None and _over_rank_limit(blob)):
                disagree.append((i, "official accepts" if want is not None else "official refuses", blob[:300]))
        elif want is not None and want != got:
            lost.append((i, blob[:300]))
        accepted += got is not None
        refused += got is None
    assert not tracebacks, tracebacks[:3]
    assert not disagree, f"{len(disagree)} disagreements, e.g. {disagree[:3]}"
    assert not lost, lost[:3]
    assert not slow, slow[:10]
    # the generator is worth its time only if both outcomes are common
    assert accepted > CASES // 10 and refused > CASES // 2, (accepted, refused)
