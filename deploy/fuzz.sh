#!/usr/bin/env bash
# deploy/fuzz.sh [SECONDS]: builds the libFuzzer targets with clang (ASan +
# UBSan) and runs each for SECONDS (default 30) from the seed corpus in
# tests/fuzz/corpus/, TS_FUZZ_JOBS (default 2) targets at a time, so the
# whole run takes about targets x SECONDS / TS_FUZZ_JOBS. Any crash, leak,
# sanitizer report or input slower than 25 s fails the run; the input is
# saved under tests/fuzz/findings/ (named <target>-crash-..., -leak-...,
# -timeout-...) to be added to the corpus as a regression test.
# `deploy/fuzz.sh --build-only` builds the targets and runs none (what
# deploy/test.sh does in the background while other phases run).
set -euo pipefail
cd "$(dirname "$0")/.."
build_only=0
if [[ "${1:-}" == "--build-only" ]]; then
  build_only=1
  shift
fi
secs="${1:-30}"
jobs="${TS_FUZZ_JOBS:-2}"
if ! command -v clang >/dev/null; then
  echo "fuzz: clang is not installed (apt-get install clang)" >&2
  exit 1
fi
# every library is compiled with libFuzzer's coverage instrumentation
# (fuzzer-no-link), not only the target's own file: without it the fuzzer is
# blind inside the code a target calls (the protocol library, the server)
CC=clang cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTS_SANITIZE=ON -DTS_FUZZ=ON \
  -DTS_BUILD_TESTS=ON -DCMAKE_C_FLAGS="-fsanitize=fuzzer-no-link" >/dev/null
targets=(codec framing envelope csv obj stl ply layerspec dispatch wshandshake modeldoc config client tllink
  ctlargs toolargs theta tlscan tlopts)
cmake --build build-fuzz -j"$(nproc)" --target "${targets[@]/#/fuzz_}"
if ((build_only)); then exit 0; fi
mkdir -p tests/fuzz/findings

# one target: its own copy of the corpus (libFuzzer adds to it), its own log,
# and its exit status in build-fuzz/fuzz_<t>.rc
run_one() {
  local t=$1 work
  work=$(mktemp -d)
  cp tests/fuzz/corpus/"$t"/* "$work"/
  # a fixed seed keeps CI repeatable; set TS_FUZZ_SEED=0 for a fresh one
  local rc=0
  build-fuzz/tests/fuzz/fuzz_"$t" -seed="${TS_FUZZ_SEED:-1}" -max_total_time="$secs" -max_len=4096 \
    -timeout=25 -artifact_prefix=tests/fuzz/findings/"$t"- "$work" >build-fuzz/fuzz_"$t".log 2>&1 ||
    rc=$?
  echo "$rc" >build-fuzz/fuzz_"$t".rc
  rm -rf "$work"
}

start=$(date +%s)
running=0
for t in "${targets[@]}"; do
  if ((running >= jobs)); then
    wait -n || true
    running=$((running - 1))
  fi
  echo "fuzz: $t for ${secs}s"
  rm -f build-fuzz/fuzz_"$t".rc
  run_one "$t" &
  running=$((running + 1))
done
wait || true

fail=0
for t in "${targets[@]}"; do
  rc=$(cat build-fuzz/fuzz_"$t".rc 2>/dev/null || echo missing)
  if [[ "$rc" != 0 ]]; then
    echo "fuzz: $t FAILED (status $rc); see build-fuzz/fuzz_$t.log and tests/fuzz/findings/$t-*" >&2
    tail -30 build-fuzz/fuzz_"$t".log >&2
    fail=1
  else
    echo "fuzz: $t: $(grep -E "^(#[0-9]+\s+DONE|Done)" build-fuzz/fuzz_"$t".log | tail -1 || true)"
  fi
done
echo "fuzz: ${#targets[@]} targets, ${jobs} at a time, $(($(date +%s) - start)) s"
exit $fail
