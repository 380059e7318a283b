#!/usr/bin/env bash
# Run the whole test suite (sets lbench up first; the engine build is cached).
set -euo pipefail
cd "$(dirname "$0")/.."
# LBENCH_SKIP_SETUP=1: set up already (scripts/suite_under_load.sh sets up once, before its CPU hogs start)
if [[ ${LBENCH_SKIP_SETUP:-} != 1 ]]; then
  bash scripts/setup.sh
  # the test extras (pytest, linters, mlx-lm for the MLX tests): setup installs only what `lbench idle` needs
  .venv/bin/python -m pip install --quiet -e '.[test]'
fi
# The Vulkan engine tests (tests/engines/test_vulkan.py) drive lbench's Vulkan build on lavapipe: build
# it here (once, cached; time in docs/builds.md) where the Vulkan packages are installed, unless the
# engine tests are deselected. Without them those tests skip and say why.
case " $* " in
  *"not engine"*) ;;
  *) if command -v glslc >/dev/null 2>&1 && ldconfig -p 2>/dev/null | grep -q 'libvulkan.so.1'; then
       .venv/bin/lbench engine install --backend vulkan \
         || echo "warning: the Vulkan engine did not build; its tests will skip (see the build log above)"
     fi ;;
esac
# Two pytest-xdist workers by default, one per core of a 2-core machine (figures, caveats: docs/builds.md).
# --dist loadscope keeps each test module on one worker, so a module-scoped fixture (real runs, generated
# models) is made once.
# LBENCH_TEST_WORKERS=N picks N workers (0: one process, no xdist); an -n or -p no:xdist given here wins.
workers=(-n "${LBENCH_TEST_WORKERS:-2}" --dist loadscope)
for arg in "$@"; do
  case "$arg" in
    -n*|--numprocesses|--numprocesses=*|no:xdist|-pno:xdist) workers=() ;;
  esac
done
# ${workers[@]+...}: an empty array under set -u is an error in bash 3.2 (macOS's /bin/bash)
exec .venv/bin/python -m pytest -p no:cacheprovider ${workers[@]+"${workers[@]}"} "$@"
