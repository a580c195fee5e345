#!/usr/bin/env bash
# deploy/build.sh [BUILD_DIR] [cmake options...]: configures and builds every C
# part of tissued with CMake (default build dir: build/).
set -euo pipefail
cd "$(dirname "$0")/.."
dir="${1:-build}"
shift || true
cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >/dev/null
cmake --build "$dir" -j"$(nproc)"
