#!/usr/bin/env bash
# Set lbench up in ./.venv and build the pinned llama-server into the cache.
# Needs: python3 (>= 3.11) with pip, cmake, g++ (and make). Safe to re-run.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x .venv/bin/python ]; then
  if ! python3 -m venv .venv 2>/dev/null; then
    # Debian without python3-venv: bootstrap virtualenv for this user
    rm -rf .venv
    python3 -m pip install --user --quiet --break-system-packages virtualenv 2>/dev/null \
      || python3 -m pip install --user --quiet virtualenv
    python3 -m virtualenv --quiet .venv
  fi
fi
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -e '.[test]'
# ccache lets builds of nearby llama.cpp versions (lbench engine install --build N) reuse objects.
# Installed only when missing and apt-get can run without a password; setup never fails over it.
if ! command -v ccache >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ]; then
    (apt-get install -y -qq ccache >/dev/null 2>&1 || true)
  elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    (sudo -n apt-get install -y -qq ccache >/dev/null 2>&1 || true)
  fi
fi
.venv/bin/lbench engine install
