"""Which GEMM shapes to benchmark: the checkpoint's dominant projections or a default.

A shape is (K, N) of W[N, K] (K = in_features, N = out_features); M (tokens) is swept separately.
"""

from __future__ import annotations

from dataclasses import dataclass

from advisor.errors import UsageError

# Qwen3-32B-class MLP up/gate projection: 5120 -> 17408 (weights > 50 MB L2 at BF16 and FP8).
DEFAULT_SHAPES: tuple[tuple[int, int], ...] = ((5120, 17408),)
DEFAULT_M: tuple[int, ...] = (1, 4, 16, 128, 2048, 8192)

# Roles whose weights are dense linear layers a weight-only kernel runs (not embeddings, heads,
# routers, vision towers or norms).
LINEAR_ROLES = frozenset({
    "attn_qkv", "attn_o", "gdn_in_proj", "gdn_out_proj", "mlp_gate_up", "mlp_down",
    "expert", "shared_expert",
})


@dataclass(frozen=True)
class Shape:
    k: int                      # in_features
    n: int                      # out_features
    label: str = "default"      # which projections have this shape
    share: float | None = None  # fraction of the checkpoint's linear weight elements

    @property
    def text(self) -> str:
        return f"{self.k}x{self.n}"


def default_shapes() -> tuple[Shape, ...]:
    return tuple(Shape(k, n) for k, n in DEFAULT_SHAPES)


def shapes_from_checkpoint(info, limit: int = 2) -> tuple[Shape, ...]:
    """The `limit` (K, N) shapes holding the most linear weight elements of a CheckpointInfo.

    Shapes whose K is not a multiple of 128 cannot hold INT4 g128 / NVFP4 blocks evenly and are
    skipped; when nothing usable remains, the default shape is returned."""
    totals: dict[tuple[int, int], int] = {}
    roles: dict[tuple[int, int], set[str]] = {}
    for group in info.modules:
        if group.role not in LINEAR_ROLES or not group.shape:
            continue
        n, k = group.shape
        if k % 128 or n <= 0:
            continue
        totals[(k, n)] = totals.get((k, n), 0) + max(group.params, n * k * max(group.count, 1))
        roles.setdefault((k, n), set()).add(group.role)
    whole = sum(totals.values())
    if not whole:
        return default_shapes()
    ranked = sorted(totals, key=lambda s: (-totals[s], s))[:limit]
    return tuple(Shape(k, n, "+".join(sorted(roles[(k, n)])), totals[(k, n)] / whole) for k, n in ranked)


def parse_m_list(text: str) -> tuple[int, ...]:
    """'1,16,2048' -> (1, 16, 2048); sorted, unique, each 1..65536."""
    try:
        values = sorted({int(part) for part in text.replace(" ", "").split(",") if part})
    except ValueError:
        raise UsageError(f"--m expects comma-separated integers, got {text!r}") from None
    if not values or values[0] < 1 or values[-1] > 65536:
        raise UsageError(f"--m values must be between 1 and 65536, got {text!r}")
    return tuple(values)
