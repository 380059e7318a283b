#!/usr/bin/env bash
# The test suite under load (a benchmark, not a test): N times with every core kept busy by CPU hogs
# this script starts (one `yes > /dev/null` per core, two on a 2-core machine) and kills by PID, then
# a line per run (exit status, pytest's counts, wall time) and the pass/fail totals (docs/builds.md).
#   bash scripts/suite_under_load.sh [-n RUNS] [-k HOGS] [-o LOGDIR] [-s] [-- PYTEST ARGS...]
#   bash scripts/suite_under_load.sh -n 3                       # the whole suite, 3 times (what issue 47 asks)
#   bash scripts/suite_under_load.sh -n 5 -- tests/repro/test_victim_scenarios.py -k multi_evict
# The pytest arguments go to scripts/test.sh (two xdist workers unless an -n is given there); its setup
# (scripts/setup.sh, the engine build) runs once before the hogs start, not in the timed runs (-s: skip it).
# Each run's whole output is kept in LOGDIR/run-N.log. Exit status: 0 when every run passed, 1 otherwise.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=3
hogs=$(nproc 2>/dev/null || echo 2)
logdir=""
setup=1
while [[ $# -gt 0 ]]; do
  case "$1" in
    -n) runs=${2:?-n needs a number of runs}; shift 2 ;;
    -k) hogs=${2:?-k needs a number of hogs}; shift 2 ;;
    -o) logdir=${2:?-o needs a folder}; shift 2 ;;
    -s) setup=0; shift ;;
    --) shift; break ;;
    -h|--help) sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) break ;;
  esac
done
[[ $runs =~ ^[1-9][0-9]*$ ]] || { echo "error: -n takes a whole number of runs (1 or more), not '$runs'" >&2; exit 2; }
[[ $hogs =~ ^[0-9]+$ ]] || { echo "error: -k takes a whole number of hogs, not '$hogs'" >&2; exit 2; }
logdir=${logdir:-$(mktemp -d "${TMPDIR:-/tmp}/suite-under-load.XXXXXX")}
mkdir -p "$logdir"

if [[ $setup -eq 1 ]]; then
  # what scripts/test.sh sets up (the runs below skip it): lbench, then the test extras
  { bash scripts/setup.sh && .venv/bin/python -m pip install --quiet -e '.[test]'; } > "$logdir/setup.log" 2>&1 \
    || { echo "error: the setup failed (see $logdir/setup.log)" >&2; exit 1; }
fi

hog_pids=()
stop_hogs() {
  local pid
  for pid in "${hog_pids[@]}"; do
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  hog_pids=()
}
trap stop_hogs EXIT
trap 'stop_hogs; exit 130' INT TERM

for _ in $(seq 1 "$hogs"); do
  yes > /dev/null &
  hog_pids+=("$!")
done
echo "$hogs CPU hog(s) running (pids ${hog_pids[*]:-none}) on $(nproc 2>/dev/null || echo '?') CPUs; $runs run(s);" \
     "logs in $logdir"

passed=0
failed=0
for n in $(seq 1 "$runs"); do
  log="$logdir/run-$n.log"
  start=$(date +%s)
  load_before=$(cut -d' ' -f1 /proc/loadavg 2>/dev/null || echo '?')
  set +e
  LBENCH_SKIP_SETUP=1 bash scripts/test.sh "$@" > "$log" 2>&1
  rc=$?
  set -e
  took=$(( $(date +%s) - start ))
  # pytest's last count line, with or without its '=' borders (-q prints none); none found is no error
  summary=$( (grep -E '(passed|failed|error).* in [0-9.]+s' "$log" || true) | tail -1 | sed -E 's/^=+ //; s/ =+$//')
  if [[ $rc -eq 0 ]]; then passed=$((passed + 1)); verdict=PASS; else failed=$((failed + 1)); verdict=FAIL; fi
  echo "run $n/$runs: $verdict (exit $rc) in ${took} s, load average before ${load_before}: ${summary:-no pytest summary}"
  if [[ $rc -ne 0 ]]; then
    grep -E '^(FAILED|ERROR) ' "$log" | head -20 | sed 's/^/    /' || true
  fi
done
stop_hogs
echo "under load ($hogs hogs): $passed of $runs run(s) passed, $failed failed; logs in $logdir"
[[ $failed -eq 0 ]]
