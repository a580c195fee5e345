#!/usr/bin/env bash
# deploy/docker-check.sh: builds the container image of deploy/Dockerfile and
# checks it the way an operator runs it (README, "Running as a service"):
#   - the image runs as the non-root user 10001, and runs under the
#     restrictions deploy/k8s/statefulset.yaml puts on its pod (read-only
#     root file system, no capabilities; see start below);
#   - a container from it serves /healthz, the web client and /metrics, and
#     Docker's HEALTHCHECK calls it healthy;
#   - tissuectl, over the published TCP port and the server key given by
#     environment, uploads a mesh (kept in the SQLite database on the
#     volume), creates a session and drives a tool in it, getting frames and
#     a contact force back;
#   - `docker stop` (SIGTERM) ends it with exit status 0 within 15 s;
#   - a second container on the same volume finds the uploaded tissue there
#     and the database passes PRAGMA integrity_check.
# Exit status 0 when every check holds, 1 otherwise (the failing check, the
# build's or the container's log on stderr).
#
# What it needs, and installs when missing (root, Debian 12): docker.io,
# debootstrap and curl (deploy/install-deps.sh --docker), and tissuectl
# (built into build/ by deploy/build.sh). A Docker engine that is not running
# is started for the check and stopped after it.
#
# The base image ($TS_DOCKER_BASE, debian:12, or one debootstrapped from
# Debian's archive) and the extra certificate authorities
# ($TS_DOCKER_EXTRA_CA) as deploy/docker-lib.sh says. The build stage fetches
# the web client's npm packages over HTTPS; where a proxy re-signs TLS, its
# authority must be trusted there: the authorities go to the build stage as
# EXTRA_CA_PEM (never into the runtime image).
# The image is built from the files git tracks (as they are in the working
# tree), tagged tissued:check and removed after unless TS_DOCKER_KEEP=1.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
# shellcheck source=SCRIPTDIR/docker-lib.sh
source deploy/docker-lib.sh
ts_check=docker-check

IMAGE=tissued:check
work="$(mktemp -d)"
name="tissued-check-$$"
vol="tissued-check-$$"
key="check-$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')"


cleanup() {
  local rc=$?
  if [[ $rc -ne 0 ]] && docker inspect "$name" >/dev/null 2>&1; then
    log "the container's log (last 40 lines):"
    docker logs --tail 40 "$name" >&2 2>&1 || true
  fi
  docker rm -f "$name" "$name-2" >/dev/null 2>&1 || true
  docker volume rm -f "$vol" >/dev/null 2>&1 || true
  if [[ "${TS_DOCKER_KEEP:-}" != 1 ]]; then
    docker image rm "$IMAGE" >/dev/null 2>&1 || true
    docker image prune -f --filter label=org.tissued.stage=build >/dev/null 2>&1 || true
  fi
  ts_engine_stop
  rm -rf "$work"
  exit $rc
}
ts_on_exit cleanup

# --- what it needs ---------------------------------------------------------
deploy/install-deps.sh --docker >&2
if [[ ! -x build/client-c/tissuectl ]]; then
  log "building tissuectl"
  TS_BUILD_TARGETS=tissuectl deploy/build.sh build >&2
fi
ctl="$root/build/client-c/tissuectl"

ts_engine_start

# --- the base image --------------------------------------------------------
ts_base_image
base="$ts_base"

# --- the build -------------------------------------------------------------
ts_extra_ca
for f in "${ts_ca_files[@]}"; do log "the build stage trusts $f"; done
ts_copy_tracked "$work/ctx"
# the engine's own builder where the client has no BuildKit component
if docker buildx version >/dev/null 2>&1; then export DOCKER_BUILDKIT=1; else export DOCKER_BUILDKIT=0; fi
log "building $IMAGE (the log: docker build's output, shown on failure)"
t0=$(date +%s)
docker build -f "$work/ctx/deploy/Dockerfile" --build-arg DEBIAN_IMAGE="$base" \
  --build-arg EXTRA_CA_PEM="$ts_ca_pem" -t "$IMAGE" "$work/ctx" >"$work/build.log" 2>&1 ||
  { tail -40 "$work/build.log" >&2; fail "docker build"; }
log "built in $(($(date +%s) - t0)) s, $(docker image inspect -f '{{.Size}}' "$IMAGE") bytes"

user="$(docker image inspect -f '{{.Config.User}}' "$IMAGE")"
[[ "$user" == 10001:10001 ]] || fail "the image's user is '$user', not 10001:10001"

# --- a container -----------------------------------------------------------
# URL PATTERN MESSAGE: fails with MESSAGE unless the GET's body matches (the
# body taken whole, then searched: `curl | grep -q` could close the pipe
# early, and under pipefail curl's write error would fail a body that matched)
expect() {
  local body
  body="$(curl -fsS "$1")" || fail "$3"
  grep -qi -- "$2" <<<"$body" || fail "$3"
}
# NAME: runs the image on the volume, its ports on loopback (ephemeral), as
# deploy/k8s/statefulset.yaml runs the pod: a read-only root file system
# with /tmp writable, no capabilities, no privilege escalation, a 2 GiB
# memory limit, the example config mounted read-only over the image's
start() {
  docker run -d --name "$1" -p 127.0.0.1::8080 -p 127.0.0.1::7070 -v "$vol:/var/lib/tissued" \
    --read-only --tmpfs /tmp --cap-drop ALL --security-opt no-new-privileges --memory 2g \
    -v "$root/deploy/tissued.conf.example:/etc/tissued/tissued.conf:ro" \
    -e TISSUED_SERVER_KEY="$key" "$IMAGE" >/dev/null
  http="$(docker port "$1" 8080/tcp | head -1 | sed 's/.*://')"
  tcp="$(docker port "$1" 7070/tcp | head -1 | sed 's/.*://')"
  local body
  for _ in $(seq 100); do
    body="$(curl -fsS "http://127.0.0.1:$http/healthz" 2>/dev/null)" && grep -q '"status":"ok"' <<<"$body" && return 0
    sleep 0.2
  done
  fail "$1: /healthz did not answer ok within 20 s"
}

start "$name"
log "serving: http 127.0.0.1:$http, tcp 127.0.0.1:$tcp"
if docker exec "$name" sh -c 'echo x > /opt/tissued/probe' 2>/dev/null; then
  fail "the root file system is writable (docker run --read-only not in force)"
fi
uid="$(docker exec "$name" id -u)"
[[ "$uid" == 10001 ]] || fail "the container's user is $uid"
[[ "$(docker top "$name" -o pid,user,args | awk 'NR > 1 && /tissued/ {print $2; exit}')" =~ ^(10001|tissued)$ ]] ||
  fail "tissued does not run as the tissued user: $(docker top "$name" -o pid,user,args)"
expect "http://127.0.0.1:$http/" "<html" "/ does not serve the web client"
expect "http://127.0.0.1:$http/metrics" "^tissued_" "/metrics has no tissued_ series"

# a small flat mesh (a 12 x 12 grid of 4 cm), uploaded: the server keeps it
awk 'BEGIN { n = 12; for (j = 0; j <= n; j++) for (i = 0; i <= n; i++)
       printf "v %.6f 0 %.6f\n", (i / n - 0.5) * 0.04, (j / n - 0.5) * 0.04;
     for (j = 0; j < n; j++) for (i = 0; i < n; i++) { a = j * (n + 1) + i + 1;
       printf "f %d %d %d\nf %d %d %d\n", a, a + n + 1, a + 1, a + 1, a + n + 1, a + n + 2 } }' \
  >"$work/grid.obj"
C=("$ctl" --port "$tcp" --key "$key" --timeout 120000)
"${C[@]}" create --mesh "$work/grid.obj" --name check-grid --layers 0.002,0.002 >"$work/create1.json" ||
  fail "create --mesh"
"${C[@]}" create >"$work/create2.json" || fail "create (the built-in tissue)"
sid="$(grep -o '"session_id":[0-9]*' "$work/create2.json" | head -1 | cut -d: -f2)"
[[ -n "$sid" ]] || fail "no session id in $(cat "$work/create2.json")"
"${C[@]}" poke --session "$sid" --seconds 2 >"$work/poke.jsonl" || fail "poke"
frames=$(grep -c '"seq"' "$work/poke.jsonl" || true)
maxf=$(grep -o '"force_n":[-0-9.e+]*' "$work/poke.jsonl" | cut -d: -f2 | sort -g | tail -1)
log "poke: $frames frames, largest tool force ${maxf:-none} N"
((frames >= 10)) || fail "poke got $frames frames"
awk -v f="${maxf:-0}" 'BEGIN { exit !(f > 0) }' || fail "the tool felt no force"

# Docker's own health check (deploy/Dockerfile's HEALTHCHECK: every 10 s)
health=""
for _ in $(seq 80); do
  health="$(docker inspect -f '{{.State.Health.Status}}' "$name")"
  [[ "$health" == healthy ]] && break
  sleep 0.5
done
log "Docker's health check: $health"
[[ "$health" == healthy ]] || fail "the container is '$health', not healthy, after 40 s"

# SIGTERM: exit 0 within the bound
t0=$(date +%s%N)
docker stop -t 15 "$name" >/dev/null
ms=$((($(date +%s%N) - t0) / 1000000))
code="$(docker inspect -f '{{.State.ExitCode}}' "$name")"
log "docker stop: exit status $code after $ms ms"
[[ "$code" == 0 ]] || fail "exit status $code after SIGTERM"
docker logs "$name" >"$work/container.log" 2>&1
if grep -qF "$key" "$work/container.log"; then fail "the server key is in the log"; fi
log "the server key is not in the container's log"

# the volume keeps the database: a second container finds the upload
start "$name-2"
C=("$ctl" --port "$tcp" --key "$key" --timeout 120000)
"${C[@]}" create --tissue check-grid >"$work/create3.json" ||
  fail "the second container does not know the uploaded tissue"
docker stop -t 15 "$name-2" >/dev/null
docker cp "$name-2:/var/lib/tissued" "$work/data" >/dev/null || fail "the volume could not be read"
[[ -f "$work/data/tissued.sqlite" ]] || fail "no tissued.sqlite on the volume: $(ls "$work/data")"
check="$(sqlite3 "$work/data/tissued.sqlite" 'PRAGMA integrity_check')"
log "the volume's database: integrity_check $check"
[[ "$check" == ok ]] || fail "integrity_check: $check"
log "all checks passed"
