"""The memory model's vocabulary: what an engine memory profile may name under ``memory`` (the loader,
advisor.cost.engine_profile, validates against it) and what advisor.cost.memory knows how to size."""

# what ``memory.budget.of`` may say the share is taken of
BUDGET_OF = ("total", "free_before_load")

# the ``memory.terms`` a profile may list, in the order their sizes are documented in advisor.cost.memory
TERM_NAMES = ("cuda_context", "weights", "draft_weights", "non_torch", "moe_workspace", "activation_peak",
              "sampler", "cuda_graphs", "warmup_cache", "runtime_headroom", "runtime_reserve", "spec_snapshots",
              "delayed_pages")
