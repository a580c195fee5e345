#!/usr/bin/env bash
# deploy/build.sh [BUILD_DIR] [cmake options...]: configures and builds every C
# part of tissued with CMake (default build dir: build/). With
# TS_BUILD_TARGETS set (names separated by spaces) only those targets and
# what they need are built (deploy/test.sh's TSan build: the daemon and the
# integration tests it runs there).
set -euo pipefail
cd "$(dirname "$0")/.."
dir="${1:-build}"
shift || true
cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >/dev/null
if [[ -n "${TS_BUILD_TARGETS:-}" ]]; then
  read -r -a targets <<<"$TS_BUILD_TARGETS"
  cmake --build "$dir" -j"$(nproc)" --target "${targets[@]}"
else
  cmake --build "$dir" -j"$(nproc)"
fi
