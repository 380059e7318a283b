#!/usr/bin/env bash
# A real trend across llama.cpp builds (a benchmark, not a test): N rounds, every round one idle
# run and one swap storm per build, the builds in a rotated order so drift of the machine does not
# line up with the build; then the runs go into a history archive and `lbench trend` states the
# change points with their bisect commands (docs/history.md has the figures).
#   bash scripts/build_trend.sh "9093 10306 10326 10729 11434" [N] [RESULTS] [ARCHIVE]
# Every build must be in the cache first: lbench engine install --build B (docs/builds.md says how long).
set -euo pipefail
read -r -a BUILDS <<< "${1:?builds, e.g. \"9093 10306 10326 11434\"}"
N=${2:-3}
KINDS=${KINDS:-idle swap}  # KINDS=idle: only the idle runs; add cswap for a storm with requests in flight at once
R=${3:-results/build-trend}
A=${4:-$R/history}
L=${LBENCH:-lbench}
K=${#BUILDS[@]}
for round in $(seq 0 $((N - 1))); do
  for i in $(seq 0 $((K - 1))); do
    b=${BUILDS[$(((i + round) % K))]}
    if [[ $KINDS == *idle* ]]; then
      # a failed run stays in RESULTS and is left out of the series (history counts complete runs).
      # --temp 0: greedy, so the random model's one token is the same every time; builds before
      # 11434 answer HTTP 500 on some sampled tokens of a synthetic model (docs/history.md)
      "$L" idle --build "$b" -m tiny-q8 --pauses 0,1.5 --reps 8 --threads 1 --cpus 1 --client-cpus 0 \
        --server-arg=--temp --server-arg=0 \
        --results "$R" --no-report >/dev/null 2>&1 || echo "round $((round + 1))/$N: build $b idle run failed"
    fi
    # the default storm (one request at a time, 3 models, 2 slots): it completes on every build
    # (with requests in flight at once, builds before 10326 fail most of them: docs/history.md)
    if [[ " $KINDS " == *" swap "* ]]; then
      "$L" swap --build "$b" --results "$R" --no-report >/dev/null 2>&1 || echo "round $((round + 1))/$N: build $b swap run failed"
    fi
    # two requests in flight, one slot: what the router's shared queue (first in 10326) changed;
    # a failed storm stays in RESULTS and is a point of swap_failed_pct (docs/history.md)
    if [[ " $KINDS " == *" cswap "* ]]; then
      "$L" swap --build "$b" -c 2 --models-max 1 -n 20 --request-timeout 30 --results "$R" --no-report \
        >/dev/null 2>&1 || echo "round $((round + 1))/$N: build $b concurrent storm failed"
    fi
    echo "round $((round + 1))/$N: build $b done ($(date +%T))"
  done
done
# the runs are this machine's own: the archive trusts this runner's key (docs/history.md, "Who can add runs")
"$L" history trust add "$("$L" history key)" --label build-trend --archive "$A" >/dev/null
"$L" history add "$R" --archive "$A"
"$L" trend --archive "$A" --out "$A/site"
