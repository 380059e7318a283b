#!/usr/bin/env bash
# Run the whole test suite (sets lbench up first; the engine build is cached).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
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
# Two pytest-xdist workers by default: most tests wait (on server start-up, pauses, child processes)
# rather than compute, so two share a 2-core machine well (figures: docs/builds.md). Tests that share an
# expensive module or session fixture carry one xdist_group mark and run on one worker (--dist loadgroup).
# LBENCH_TEST_WORKERS=N picks N workers (0: one process, no xdist); an -n or -p no:xdist given here wins.
workers=(-n "${LBENCH_TEST_WORKERS:-2}" --dist loadgroup)
for arg in "$@"; do
  case "$arg" in
    -n*|--numprocesses|--numprocesses=*|no:xdist|-pno:xdist) workers=() ;;
  esac
done
exec .venv/bin/python -m pytest -p no:cacheprovider "${workers[@]}" "$@"
