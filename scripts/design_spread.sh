#!/usr/bin/env bash
# Between-run spread of three gate designs, interleaved: N fresh server starts each (a benchmark, not a test).
#   bash scripts/design_spread.sh [N] [RESULTS]   then: lbench gate-plan --runs ... --results RESULTS/<design>
# Run it on a quiet machine: other work on the CPUs is what it would measure. docs/statistics.md has the figures.
set -euo pipefail
N=${1:-6}
R=${2:-results/design-spread}
L=${LBENCH:-lbench}
for _ in $(seq "$N"); do
  "$L" idle -m tiny-q8 --pauses 0,1.5 --reps 8 --results "$R/default" --no-report >/dev/null
  "$L" idle -m tiny-q8 --pauses 0,1.5 --reps 8 --threads 1 --cpus 1 --client-cpus 0 --results "$R/pinned" --no-report >/dev/null
  "$L" idle -m tiny-q8 --pauses 0,1.5 --reps 8 --omp-wait-policy passive --results "$R/passive" --no-report >/dev/null
done
for d in default pinned passive; do
  # shellcheck disable=SC2046
  "$L" gate-plan $(ls "$R/$d" | grep -v '^\.' | sed 's/^/--runs /') --results "$R/$d" --gate-on 0,1.5
done
