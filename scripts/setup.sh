#!/usr/bin/env bash
# Set lbench up in ./.venv (what `lbench idle` needs; the test extras come with scripts/test.sh) and build
# the pinned llama-server into the cache. Safe to re-run.
# Needs Python >= 3.11, cmake and a C++ compiler (and make); setup looks for them first and, when one is
# missing, says which command installs it and stops before anything is changed.
# Python: $LBENCH_PYTHON if set, else the first >= 3.11 of python3.13, python3.12, python3.11, python3 and
# python3.14 on PATH, then in Homebrew's prefixes (/opt/homebrew/bin, /usr/local/bin). A .venv made by an
# older Python (macOS's /usr/bin/python3 is 3.9) is replaced.
# --check (or LBENCH_SETUP_CHECK=1): print what was chosen and found, change nothing, exit 0 (or 2).
# LBENCH_SETUP_BREW_DIRS replaces the Homebrew prefixes searched (tests/scripts/test_setup.py).
set -euo pipefail
cd "$(dirname "$0")/.."
check_only="${LBENCH_SETUP_CHECK:-0}"
for arg in "$@"; do
  case "$arg" in
    --check) check_only=1 ;;
    *) echo "setup.sh: unknown argument: $arg (only --check)" >&2; exit 2 ;;
  esac
done
os="$(uname -s)"

# "3.12" from a Python's own --version ("Python 3.12.4"); empty when it does not run
python_version() {
  local out
  out="$("$1" --version 2>&1 </dev/null)" || return 0
  case "$out" in
    "Python "[0-9]*) out="${out#Python }"; echo "${out%%[!0-9.]*}" ;;
  esac
}
version_ok() {  # version_ok 3.12.4 -> true when >= 3.11
  local major minor rest
  major="${1%%.*}"; rest="${1#*.}"; minor="${rest%%.*}"
  [[ "$major" =~ ^[0-9]+$ && "$minor" =~ ^[0-9]+$ ]] || return 1
  (( major > 3 || (major == 3 && minor >= 11) ))
}
find_python() {
  local name dir path version
  if [ -n "${LBENCH_PYTHON:-}" ]; then
    version="$(python_version "$LBENCH_PYTHON")"
    if version_ok "$version"; then echo "$LBENCH_PYTHON"; return 0; fi
    echo "setup.sh: LBENCH_PYTHON=$LBENCH_PYTHON is Python ${version:-that does not run}; lbench needs 3.11 or newer" >&2
    return 1
  fi
  for name in python3.13 python3.12 python3.11 python3 python3.14; do
    path="$(command -v "$name" 2>/dev/null)" || continue
    version="$(python_version "$path")"
    if version_ok "$version"; then echo "$path"; return 0; fi
  done
  for dir in ${LBENCH_SETUP_BREW_DIRS-/opt/homebrew/bin /usr/local/bin}; do
    for name in python3.13 python3.12 python3.11 python3.14; do
      [ -x "$dir/$name" ] || continue
      version="$(python_version "$dir/$name")"
      if version_ok "$version"; then echo "$dir/$name"; return 0; fi
    done
  done
  return 1
}
# the command that installs the missing pieces, for this system
install_hint() {  # install_hint python|cmake|compiler|make
  case "$os:$1" in
    Darwin:compiler|Darwin:make) echo "xcode-select --install   # Apple's Command Line Tools: clang++, make" ;;
    Darwin:cmake) if command -v brew >/dev/null 2>&1; then echo "brew install cmake"
                  else echo "install Homebrew (https://brew.sh), then: brew install cmake"; fi ;;
    Darwin:python) if command -v brew >/dev/null 2>&1; then echo "brew install python@3.12"
                   else echo "install Homebrew (https://brew.sh), then: brew install python@3.12 (or Python 3.12 from https://www.python.org/downloads/macos/)"; fi ;;
    *:python) if command -v apt-get >/dev/null 2>&1; then echo "sudo apt-get install -y python3.11 python3.11-venv"
              else echo "install Python 3.11 or newer (https://www.python.org/downloads/) with your package manager"; fi ;;
    *) if command -v apt-get >/dev/null 2>&1; then echo "sudo apt-get install -y cmake g++ make"
       else echo "install cmake, a C++ compiler (g++ or clang++) and make with your package manager"; fi ;;
  esac
}
have_compiler() {
  if [ "$os" = Darwin ]; then  # /usr/bin/c++ is a stub there until the Command Line Tools are installed
    xcode-select -p >/dev/null 2>&1 || return 1
  fi
  local cxx
  for cxx in ${CXX:-} c++ g++ clang++; do
    command -v "$cxx" >/dev/null 2>&1 && return 0
  done
  return 1
}

missing=()
python="$(find_python)" || missing+=(python)
command -v cmake >/dev/null 2>&1 || missing+=(cmake)
have_compiler || missing+=(compiler)
command -v make >/dev/null 2>&1 || command -v ninja >/dev/null 2>&1 || missing+=(make)
if [ "${#missing[@]}" -gt 0 ]; then
  echo "setup.sh: missing: ${missing[*]} (nothing was changed)" >&2
  for what in "${missing[@]}"; do
    case "$what" in
      python) echo "  Python >= 3.11 (looked for python3.13, python3.12, python3.11, python3, python3.14 on PATH" \
                   "and in ${LBENCH_SETUP_BREW_DIRS-/opt/homebrew/bin /usr/local/bin}): $(install_hint python)" >&2 ;;
      cmake) echo "  cmake: $(install_hint cmake)" >&2 ;;
      compiler) echo "  a C++ compiler: $(install_hint compiler)" >&2 ;;
      make) echo "  make (or ninja): $(install_hint make)" >&2 ;;
    esac
  done
  exit 2
fi

# a .venv made by a Python older than 3.11 (or one that no longer runs) is replaced, never reused
venv_version=""
[ -x .venv/bin/python ] && venv_version="$(python_version .venv/bin/python)"
replace_venv=0
if [ -e .venv ] && ! version_ok "$venv_version"; then replace_venv=1; fi
echo "python: $python (Python $(python_version "$python"))"
echo "cmake: $(command -v cmake)"
if [ "$replace_venv" = 1 ]; then
  echo "venv: .venv was made by Python ${venv_version:-that does not run}: replacing it"
elif [ -e .venv ]; then
  echo "venv: .venv (Python $venv_version) kept"
else
  echo "venv: making .venv"
fi
if [ "$check_only" = 1 ]; then
  exit 0
fi

if [ "$replace_venv" = 1 ]; then rm -rf .venv; fi
if [ ! -x .venv/bin/python ]; then
  if ! "$python" -m venv .venv 2>/dev/null; then
    # Debian without python3-venv: bootstrap virtualenv for this user
    rm -rf .venv
    "$python" -m pip install --user --quiet --break-system-packages virtualenv 2>/dev/null \
      || "$python" -m pip install --user --quiet virtualenv
    "$python" -m virtualenv --quiet .venv
  fi
fi
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -e .
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
