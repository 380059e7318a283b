#!/usr/bin/env bash
# Between-run spread of the gate's candidate designs, interleaved (a benchmark, not a test):
# N rounds; every round starts one fresh server per design, the designs in a rotated order so a
# drift of the machine hits all of them alike. Then the spreads by design, gating metric, reps per
# run and fresh vs same process (scripts/variance_sources.py).
#   bash scripts/design_spread.sh [N] [RESULTS]
# Run it on a quiet machine: other work on the CPUs is what it would measure. docs/statistics.md
# has the figures (10 designs x 6 rounds: about 25 minutes here).
set -euo pipefail
N=${1:-6}
R=${2:-results/design-spread}
L=${LBENCH:-lbench}
PY=${PYTHON:-python3}
PIN=(--threads 1 --cpus 1 --client-cpus 0)
design() {  # design name -> its lbench idle arguments (round number $2 for the seed design)
  case "$1" in
    default)        echo "-m tiny-q8" ;;
    pinned)         echo "-m tiny-q8 ${PIN[*]}" ;;
    passive)        echo "-m tiny-q8 --omp-wait-policy passive" ;;
    pinned-passive) echo "-m tiny-q8 ${PIN[*]} --omp-wait-policy passive" ;;
    warmup20)       echo "-m tiny-q8 --warmup 20" ;;
    pinned-warmup20) echo "-m tiny-q8 ${PIN[*]} --warmup 20" ;;
    pinned-reps16)  echo "-m tiny-q8 ${PIN[*]} --reps 16" ;;
    pinned-seeds)   echo "-m tiny-q8 ${PIN[*]} --seed $2" ;;
    1b-default)     echo "-m llama3.2-1b-q8" ;;
    1b-pinned)      echo "-m llama3.2-1b-q8 ${PIN[*]}" ;;
  esac
}
DESIGNS=(default pinned passive pinned-passive warmup20 pinned-warmup20 pinned-reps16 pinned-seeds 1b-default 1b-pinned)
K=${#DESIGNS[@]}
for round in $(seq 0 $((N - 1))); do
  for i in $(seq 0 $((K - 1))); do
    d=${DESIGNS[$(((i + round) % K))]}
    # shellcheck disable=SC2046
    "$L" idle --pauses 0,1.5 --reps 8 $(design "$d" "$round") --results "$R/$d" --no-report >/dev/null
    echo "round $((round + 1))/$N: $d done ($(date +%T))"
  done
done
"$PY" "$(dirname "$0")/variance_sources.py" "$R" --pauses 0,1.5
