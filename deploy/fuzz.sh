#!/usr/bin/env bash
# deploy/fuzz.sh [SECONDS]: builds the libFuzzer targets with clang (ASan +
# UBSan) and runs each for SECONDS (default 30) from the seed corpus in
# tests/fuzz/corpus/. Any crash fails; the crashing input is saved under
# tests/fuzz/findings/ to be added to the corpus as a regression test.
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${1:-30}"
if ! command -v clang >/dev/null; then
  echo "fuzz: clang is not installed (apt-get install clang)" >&2
  exit 1
fi
CC=clang cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTS_SANITIZE=ON -DTS_FUZZ=ON \
  -DTS_BUILD_TESTS=ON >/dev/null
targets=(codec framing envelope csv obj stl ply layerspec)
cmake --build build-fuzz -j"$(nproc)" --target "${targets[@]/#/fuzz_}"
mkdir -p tests/fuzz/findings
fail=0
for t in "${targets[@]}"; do
  work=$(mktemp -d)
  cp tests/fuzz/corpus/"$t"/* "$work"/
  echo "fuzz: $t for ${secs}s"
  # a fixed seed keeps CI repeatable; set TS_FUZZ_SEED=0 for a fresh one
  if ! build-fuzz/tests/fuzz/fuzz_"$t" -seed="${TS_FUZZ_SEED:-1}" -max_total_time="$secs" -max_len=4096 \
      -artifact_prefix=tests/fuzz/findings/"$t"- "$work" 2>build-fuzz/fuzz_"$t".log; then
    echo "fuzz: $t FAILED; see build-fuzz/fuzz_$t.log and tests/fuzz/findings/" >&2
    tail -30 build-fuzz/fuzz_"$t".log >&2
    fail=1
  else
    grep -E "^(#[0-9]+\s+DONE|Done)" build-fuzz/fuzz_"$t".log | tail -1 || true
  fi
  rm -rf "$work"
done
exit $fail
