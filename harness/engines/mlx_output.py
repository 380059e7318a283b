"""What mlx and mlx-lm print, read: mlx-lm's wired-limit warning and MLX's residency-set lines
(``MLX_RESIDENCY_DEBUG``).  Tested in tests/repro/test_mlx_scenarios.py (the warning on real published
mlx-lm output; the residency line has no real output to test on until a Mac run, docs/mac.md); the
MLX claim scenarios (harness/repro/mlx_scenarios.py) use them."""

from __future__ import annotations

import re

# mlx_lm/generate.py, wired_limit(): print(f"[WARNING] Generating with a model that requires {model_mb} MB "
# f"which is close to the maximum recommended size of {max_rec_mb} MB. This can be slow. ...")
WARNING_LINE = re.compile(r"\[WARNING\] Generating with a model that requires (?P<model_mb>\d+) MB which is close to "
                          r"the maximum recommended size of (?P<max_mb>\d+) MB")
# mlx/backend/metal/resident.cpp, ResidencySets::add_set_locked() with MLX_RESIDENCY_DEBUG set:
# fprintf(stderr, "[residency] created residency set %zu (max_bytes_per_set=%zu MB)\n", ...)
RESIDENCY_LINE = re.compile(r"\[residency\] created residency set (?P<n>\d+) \(max_bytes_per_set=(?P<mb>\d+) MB\)")


def wired_limit_warnings(text: str) -> list[tuple[int, int]]:
    """(model MB, recommended MB) of every wired-limit warning in ``text``."""
    return [(int(m.group("model_mb")), int(m.group("max_mb"))) for m in WARNING_LINE.finditer(text)]


def residency_sets(text: str) -> list[tuple[int, int]]:
    """(set index, max_bytes_per_set MB) of every residency-set creation line in ``text``."""
    return [(int(m.group("n")), int(m.group("mb"))) for m in RESIDENCY_LINE.finditer(text)]
