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
# System packages lbench can use, each installed only when its command is missing and apt-get can
# run without a password (root, or sudo -n); setup never fails over them.
apt_install_if_missing() {  # apt_install_if_missing COMMAND PACKAGE...
  command -v "$1" >/dev/null 2>&1 && return 0
  shift
  command -v apt-get >/dev/null 2>&1 || return 0
  local as=()
  if [ "$(id -u)" != 0 ]; then
    command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null || return 0
    as=(sudo -n)
  fi
  # stale package lists: update once and try again
  ("${as[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null 2>&1 \
    || { "${as[@]}" apt-get update -qq >/dev/null 2>&1 \
         && "${as[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null 2>&1; } \
    || true)
  return 0
}
# ccache lets builds of nearby llama.cpp versions (lbench engine install --build N) reuse objects.
apt_install_if_missing ccache ccache
# Chromium (headless) lets tests/report/test_browser.py open every report in a real browser.
apt_install_if_missing chromium chromium
# Vulkan: the loader, Mesa's lavapipe (a software Vulkan device), glslc and the headers, so that
# `lbench engine install --backend vulkan` can build (on Debian 12 it also fetches Debian 13's headers
# into lbench's cache; docs/builds.md). Only packages here: the Vulkan engine itself is built by
# scripts/test.sh for the engine tests, or by you; `lbench idle` never waits for it.
apt_install_if_missing glslc glslc mesa-vulkan-drivers libvulkan-dev spirv-headers vulkan-tools
.venv/bin/lbench engine install
