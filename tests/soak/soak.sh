#!/usr/bin/env bash
# tests/soak/soak.sh [SECONDS] [BUILD_DIR]: runs the soak (tests/soak/soak.c)
# against BUILD_DIR's tissued (default build/, a normal build) for SECONDS
# (default 600) and prints its JSON lines: RSS samples, then the result.
# Exit status 0 when memory stayed within the bound, 1 otherwise.
set -euo pipefail
cd "$(dirname "$0")/../.."
secs="${1:-600}"
dir="${2:-build}"
cmake --build "$dir" --target soak tissued >/dev/null
TS_SOAK=1 TS_SOAK_SECONDS="$secs" TISSUED_BIN="$dir/server/tissued" "$dir/tests/soak"
