#!/usr/bin/env bash
# deploy/fresh-check.sh: the README's two commands on a fresh Debian 12
# machine, which a developer's or CI's machine (its packages, its Node.js)
# never is: a container from a bare Debian 12 image (deploy/docker-lib.sh:
# debian:12, or one debootstrapped from Debian's archive) gets the files git
# tracks and runs the command as the README gives it, as root, with nothing
# installed beforehand; the shared meshes beside the clone (../shared) are
# mounted where the clone expects them.
#
#   deploy/fresh-check.sh [run]   deploy/run.sh: it must print the URL with a
#                                 new server key; then, inside the container,
#                                 /healthz, / and /metrics answer, the
#                                 container's own tissuectl creates a session
#                                 of the built-in tissue and pokes it (frames
#                                 and a tool force), SIGTERM ends the daemon
#                                 with status 0, the database passes
#                                 PRAGMA integrity_check, and the same command
#                                 run again (nothing left to install or
#                                 build) serves again with the key kept
#   deploy/fresh-check.sh test    deploy/test.sh: its exit status and its
#                                 summary lines (about 30 minutes on 2 cores,
#                                 most of it the installs and the builds)
#
# Exit status 0 when the command and every check hold, 1 otherwise (the
# failing check and the container's log on stderr); 2 on a usage error. The
# whole output of the command goes to $TS_FRESH_LOG (default
# /tmp/fresh-check-MODE.log). Bounded: the run mode waits up to
# $TS_FRESH_RUN_SECONDS (default 1200) for the URL, the test mode up to
# $TS_FRESH_TEST_SECONDS (default 5400) for the suite.
# It needs, and installs when missing (root, Debian 12): docker.io and
# debootstrap (deploy/install-deps.sh --docker); a Docker engine that is not
# running is started for the check and stopped after it. Where a proxy
# re-signs TLS, the container's npm trusts the authorities deploy/docker-lib.sh
# finds ($TS_DOCKER_EXTRA_CA) through NODE_EXTRA_CA_CERTS, as this machine's
# does. Not in CI (it is a check of the README, not of the code): run it
# after a change to what the two commands install or build.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=SCRIPTDIR/docker-lib.sh
source deploy/docker-lib.sh
ts_check=fresh-check

usage() { sed -n '/^#   deploy/,/^# Exit/p' "$0" | sed '$d; s/^# \{0,1\}//'; }
mode="${1:-run}"
case "$mode" in
run | test) ;;
-h | --help)
  echo "usage: deploy/fresh-check.sh [run | test]"
  echo
  usage
  exit 0
  ;;
*)
  echo "fresh-check: unknown mode '$mode' (run or test; --help)" >&2
  exit 2
  ;;
esac
(($# <= 1)) || { echo "fresh-check: one mode at most (--help)" >&2; exit 2; }

work="$(mktemp -d)"
name="tissued-fresh-$$"
out="${TS_FRESH_LOG:-/tmp/fresh-check-$mode.log}"
cleanup() {
  local rc=$?
  if [[ $rc -ne 0 ]] && docker inspect "$name" >/dev/null 2>&1; then
    docker logs "$name" >"$out" 2>&1 || true
    log "the container's output (last 40 lines; all of it in $out):"
    tail -40 "$out" >&2 || true
  fi
  docker rm -f "$name" >/dev/null 2>&1 || true
  ts_engine_stop
  rm -rf "$work"
  exit $rc
}
ts_on_exit cleanup

deploy/install-deps.sh --docker >&2
ts_engine_start
ts_base_image
ts_extra_ca
ts_copy_tracked "$work/tree"

# The container: the bare image, the tree in /w, the extra authorities for
# npm, the command as the README gives it; created here, started below
env_ca=()
if [[ -n "$ts_ca_pem" ]]; then
  printf '%s' "$ts_ca_pem" >"$work/extra-ca.pem"
  env_ca=(-e NODE_EXTRA_CA_CERTS=/etc/tissued-extra-ca.pem)
  log "npm in the container trusts ${ts_ca_files[*]}"
fi
# the real meshes the tests and the benchmarks read beside the clone
# (../shared/data/meshes, CMakeLists.txt's TS_SHARED_DIR), read-only at /shared
shared="${TS_SHARED_DIR:-$PWD/../shared}"
mount_shared=()
if [[ -d "$shared/data" ]]; then
  mount_shared=(-v "$(cd "$shared" && pwd):/shared:ro")
else
  log "no $shared/data: the tests that read its meshes will fail (TS_SHARED_DIR names it)"
fi
# chromium needs more shared memory than Docker's default 64 MB
docker create --name "$name" -w /w --shm-size 2g "${env_ca[@]}" "${mount_shared[@]}" \
  "$ts_base" "deploy/$mode.sh" >/dev/null
docker cp "$work/tree/." "$name:/w" >/dev/null
[[ -z "$ts_ca_pem" ]] || docker cp "$work/extra-ca.pem" "$name:/etc/tissued-extra-ca.pem" >/dev/null

running() { [[ "$(docker inspect -f '{{.State.Running}}' "$name")" == true ]]; }

if [[ "$mode" == test ]]; then
  limit="${TS_FRESH_TEST_SECONDS:-5400}"
  log "deploy/test.sh in $ts_base (up to $limit s; its output in $out)"
  t0=$SECONDS
  docker start "$name" >/dev/null
  docker logs -f "$name" >"$out" 2>&1 &
  follow=$!
  code=""
  while ((SECONDS - t0 < limit)); do
    if ! running; then
      code="$(docker inspect -f '{{.State.ExitCode}}' "$name")"
      break
    fi
    sleep 5
  done
  # (docker logs -f ends with the container; a container past the limit
  # still runs, and the cleanup removes it)
  [[ -n "$code" ]] || kill "$follow" 2>/dev/null || true
  wait "$follow" 2>/dev/null || true
  grep -E "^== |^phases:|^tests:" "$out" >&2 || true
  [[ -n "$code" ]] || fail "deploy/test.sh still running after $limit s"
  log "deploy/test.sh: exit status $code after $((SECONDS - t0)) s"
  [[ "$code" == 0 ]] || fail "deploy/test.sh exit status $code"
  log "all checks passed"
  exit 0
fi

# --- run -------------------------------------------------------------------
# Starts the container and waits for tissued's line saying the URL: the line
# in url_line, this start's output in $work/start.log, every start's in $out
wait_url() {
  local limit="${TS_FRESH_RUN_SECONDS:-1200}" t0=$SECONDS since
  since="$(date -u +%Y-%m-%dT%H:%M:%S.%NZ)"
  docker start "$name" >/dev/null
  while ((SECONDS - t0 < limit)); do
    docker logs --since "$since" "$name" >"$work/start.log" 2>&1 || true
    docker logs "$name" >"$out" 2>&1 || true
    url_line="$(grep -m1 '^tissued: open http' "$work/start.log" || true)"
    [[ -z "$url_line" ]] || { took=$((SECONDS - t0)); return 0; }
    running || fail "deploy/run.sh ended (exit status $(docker inspect -f '{{.State.ExitCode}}' "$name")) before printing the URL"
    sleep 2
  done
  fail "no URL within $limit s"
}
# URL: the body of a GET from inside the container, by the Node.js that
# deploy/run.sh installed
get() {
  docker exec "$name" node -e 'fetch(process.argv[1]).then(async r => {
      if (!r.ok) { console.error(r.status); process.exit(1); }
      process.stdout.write(await r.text()); }).catch(e => { console.error(String(e)); process.exit(1); })' "$1"
}
# URL PATTERN MESSAGE: fails with MESSAGE unless the GET's body matches (the
# body taken whole, then searched: `get | grep -q` could close the pipe early,
# and under pipefail the writer's error would fail a body that matched)
expect() {
  local body
  body="$(get "$1")" || fail "$3"
  grep -qi -- "$2" <<<"$body" || fail "$3"
}

log "deploy/run.sh in $ts_base (up to ${TS_FRESH_RUN_SECONDS:-1200} s; its output in $out)"
wait_url
log "the URL after $took s: ${url_line//#key=*/#key=...}"
[[ "$url_line" =~ http://127\.0\.0\.1:8080/#key=([A-Za-z0-9_-]+) ]] ||
  fail "the first start printed no http://127.0.0.1:8080/#key=...: $url_line"
key="${BASH_REMATCH[1]}"
[[ "$(docker exec "$name" cat data/server.key)" == "$key" ]] || fail "the printed key is not data/server.key's"

expect http://127.0.0.1:8080/healthz '"status":"ok"' "/healthz"
expect http://127.0.0.1:8080/ "<html" "/ does not serve the web client"
expect http://127.0.0.1:8080/metrics "^tissued_" "/metrics has no tissued_ series"
log "/healthz, / and /metrics answer"

C=(build/client-c/tissuectl --port 7070 --key "$key" --timeout 120000)
docker exec "$name" "${C[@]}" create >"$work/create.json" || fail "tissuectl create"
sid="$(grep -o '"session_id":[0-9]*' "$work/create.json" | head -1 | cut -d: -f2)"
[[ -n "$sid" ]] || fail "no session id in $(cat "$work/create.json")"
docker exec "$name" "${C[@]}" poke --session "$sid" --seconds 2 >"$work/poke.jsonl" || fail "tissuectl poke"
frames=$(grep -c '"seq"' "$work/poke.jsonl" || true)
maxf=$(grep -o '"force_n":[-0-9.e+]*' "$work/poke.jsonl" | cut -d: -f2 | sort -g | tail -1)
log "tissuectl poke: $frames frames, largest tool force ${maxf:-none} N"
((frames >= 10)) || fail "poke got $frames frames"
awk -v f="${maxf:-0}" 'BEGIN { exit !(f > 0) }' || fail "the tool felt no force"

stop() {
  local t0 code
  t0=$(date +%s%N)
  docker stop -t 15 "$name" >/dev/null
  code="$(docker inspect -f '{{.State.ExitCode}}' "$name")"
  log "SIGTERM: exit status $code after $((($(date +%s%N) - t0) / 1000000)) ms"
  [[ "$code" == 0 ]] || fail "exit status $code after SIGTERM"
}
stop
docker cp "$name:/w/data" "$work/data" >/dev/null || fail "no data directory"
check="$(sqlite3 "$work/data/tissued.sqlite" 'PRAGMA integrity_check')"
log "data/tissued.sqlite: integrity_check $check"
[[ "$check" == ok ]] || fail "integrity_check: $check"

# the same command again on the same machine: nothing to install or build,
# the key kept and not printed
log "deploy/run.sh again"
wait_url
log "the URL after $took s: $url_line"
[[ "$url_line" == *"http://127.0.0.1:8080/ "* ]] || fail "the second start printed: $url_line"
if grep -qF "$key" "$work/start.log"; then fail "the second start printed the key"; fi
expect http://127.0.0.1:8080/healthz '"status":"ok"' "/healthz after the second start"
docker exec "$name" "${C[@]}" sessions >/dev/null || fail "the kept key is refused after the second start"
stop
log "all checks passed"
