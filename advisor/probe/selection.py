"""The planning set: which card, how many, and whether they are really here or a what-if."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from advisor.errors import UsageError
from advisor.gpu_spec import GpuSpec
from advisor.probe.model import ProbeResult

AUTO = "auto"


@dataclass(frozen=True)
class GpuSelection:
    spec: GpuSpec
    count: int                     # N identical cards
    source: str                    # probed | what-if
    note: str
    devices: tuple[int, ...] = ()  # NVML indices of the probed cards used (empty for what-if)

    @property
    def label(self) -> str:
        return f"{self.count} x {self.spec.name}" if self.count > 1 else self.spec.name


def resolve_gpus(probe: ProbeResult | None, gpu_arg: str | None, count: int | None) -> GpuSelection:
    """`--gpu ID|auto --gpus N` -> a GpuSelection.

    auto: the probed cards of the most common model (ties: the one at the lowest index);
    an ID: that table entry, "probed" when enough such cards are in this box, else a what-if.
    """
    if count is not None and count < 1:
        raise UsageError(f"--gpus must be at least 1 (got {count})")
    if gpu_arg is None or gpu_arg.strip().lower() == AUTO:
        return _auto(probe, count)
    from advisor.gpu_table import get_gpu

    spec = get_gpu(gpu_arg)
    here = [d for d in (probe.devices if probe else ()) if d.spec.id == spec.id]
    n = count or 1
    if here and n <= len(here):
        use = here[:n]
        return GpuSelection(use[0].spec, n, "probed", f"{n} of {len(here)} probed {spec.name}" + _mig_note(use),
                            tuple(d.index for d in use))
    reason = f"{len(here)} in this box" if here else "not in this box"
    return GpuSelection(spec, n, "what-if", f"what-if: {n} x {spec.name} ({reason})")


def _auto(probe: ProbeResult | None, count: int | None) -> GpuSelection:
    if probe is None or not probe.devices:
        why = probe.message if probe is not None else "no probe"
        raise UsageError(f"no GPU to plan for ({why}): pick one with --gpu ID [--gpus N] "
                         "(list: nvfp4-advisor gpus)")
    models = Counter(d.spec.id for d in probe.devices)
    first_index: dict = {}
    for d in probe.devices:
        first_index.setdefault(d.spec.id, d.index)
    best = min(models, key=lambda i: (-models[i], first_index[i]))
    here = [d for d in probe.devices if d.spec.id == best]
    n = count or len(here)
    if n > len(here):
        raise UsageError(f"only {len(here)} x {here[0].spec.name} in this box; for a what-if use "
                         f"--gpu {best} --gpus {n}")
    others = [f"{c} x {i}" for i, c in models.items() if i != best]
    note = f"probed: {n} x {here[0].spec.name}"
    if others:
        note += f" (most common model; also here: {', '.join(others)})"
    return GpuSelection(here[0].spec, n, "probed", note + _mig_note(here[:n]), tuple(d.index for d in here[:n]))


def _mig_note(devices) -> str:
    """A MIG-enabled card is planned as the whole card; an engine there sees one slice only."""
    parts = []
    for d in devices:
        if d.nvml.mig_current:
            slices = d.nvml.mig_devices
            sizes = sorted({(m.sm_count, round(m.memory_total_bytes / 2**30, 1)) for m in slices
                            if m.sm_count and m.memory_total_bytes})
            what = ", ".join(f"{sm} SMs / {gib:g} GiB" for sm, gib in sizes) or "size N/A"
            parts.append(f"GPU {d.index} has MIG on ({len(slices)} slice(s): {what}): an engine runs on one "
                         "slice, so this whole-card plan is optimistic; disable MIG or plan for the slice")
    return "; " + "; ".join(parts) if parts else ""
