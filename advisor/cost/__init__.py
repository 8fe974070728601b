"""Cost model: predicts decode/prefill speed and memory of the kernel path `explain` chose.

Pure functions over frozen inputs (GpuSpec, CheckpointInfo, Explanation, Workload, Overrides,
EngineMemory, Calibration). Every number carries its derivation (advisor.cost.derived.Derived).
Public entry: ``advisor.cost.plan.make_plan``.
"""
