# shellcheck shell=bash
# deploy/docker-lib.sh: what the two container checks share, sourced by
# deploy/docker-check.sh (the image of deploy/Dockerfile) and
# deploy/fresh-check.sh (the README's commands on a fresh Debian 12): a Docker
# engine, a Debian 12 base image, the certificate authorities a TLS-re-signing
# proxy needs trusted, and a copy of the files git tracks; and their messages
# and exit. The caller sets ts_check (its name, the messages' prefix) and
# `work` (a scratch directory its cleanup removes).

log() { echo "${ts_check:?}: $*" >&2; }
fail() {
  log "FAILED: $*"
  exit 1
}
# FUNCTION: runs at exit, and a signal ends the script through it too
# (containers, the engine it started)
ts_on_exit() {
  # shellcheck disable=SC2064 # the function's name, fixed now
  trap "$1" EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
}

# An engine that answers, started here (root only) when none does; its pid in
# ts_engine_pid for ts_engine_stop, empty when it was already running.
ts_engine_pid=""
ts_engine_start() {
  docker info >/dev/null 2>&1 && return 0
  [[ $(id -u) -eq 0 ]] || fail "no Docker engine answers, and only root can start one here"
  log "starting a Docker engine (dockerd) for the check"
  dockerd >"${work:?}/dockerd.log" 2>&1 &
  ts_engine_pid=$!
  for _ in $(seq 60); do
    docker info >/dev/null 2>&1 && return 0
    kill -0 "$ts_engine_pid" 2>/dev/null || { tail -20 "$work/dockerd.log" >&2; fail "dockerd exited"; }
    sleep 0.5
  done
  tail -20 "$work/dockerd.log" >&2
  fail "dockerd did not answer within 30 s"
}
ts_engine_stop() {
  [[ -n "$ts_engine_pid" ]] || return 0
  log "stopping the Docker engine it started"
  kill "$ts_engine_pid" 2>/dev/null || true
  wait "$ts_engine_pid" 2>/dev/null || true
  ts_engine_pid=""
}

# The Debian 12 base image, in ts_base: $TS_DOCKER_BASE when set; else
# debian:12 when the engine has it or can pull it; else one made with
# debootstrap from Debian's archive ($TS_DEBIAN_MIRROR, default
# http://deb.debian.org/debian) and imported as tissued-base/debian:12 (kept
# for the next run), for machines that reach Debian's archive but no image
# registry. Its sources are debian:12's: the point release, its updates and
# the security updates.
ts_base=""
ts_base_image() {
  local mirror="${TS_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
  ts_base="${TS_DOCKER_BASE:-}"
  if [[ -z "$ts_base" ]]; then
    if docker image inspect debian:12 >/dev/null 2>&1 || timeout 120 docker pull -q debian:12 >/dev/null 2>&1; then
      ts_base=debian:12
    else
      ts_base=tissued-base/debian:12
      if ! docker image inspect "$ts_base" >/dev/null 2>&1; then
        log "no debian:12 from a registry: making $ts_base with debootstrap from $mirror"
        debootstrap --variant=minbase bookworm "$work/rootfs" "$mirror" >"$work/debootstrap.log" 2>&1 ||
          { tail -20 "$work/debootstrap.log" >&2; fail "debootstrap"; }
        printf 'deb %s bookworm main\ndeb %s bookworm-updates main\ndeb %s-security bookworm-security main\n' \
          "$mirror" "$mirror" "$mirror" >"$work/rootfs/etc/apt/sources.list"
        tar -C "$work/rootfs" -c . | docker import - "$ts_base" >/dev/null
        rm -rf "$work/rootfs"
      fi
    fi
  fi
  log "base image: $ts_base"
}

# The extra certificate authorities, in ts_ca_files (paths) and ts_ca_pem
# (their text): the files in $TS_DOCKER_EXTRA_CA (space-separated), by
# default the machine's own additions in /usr/local/share/ca-certificates.
# A file named by hand and missing is an error; the default matching none,
# no extra authority.
ts_ca_files=()
ts_ca_pem=""
ts_extra_ca() {
  local f files
  read -r -a files <<<"${TS_DOCKER_EXTRA_CA:-$(echo /usr/local/share/ca-certificates/*.crt)}"
  for f in "${files[@]}"; do
    if [[ ! -f "$f" ]]; then
      [[ -z "${TS_DOCKER_EXTRA_CA:-}" ]] || fail "TS_DOCKER_EXTRA_CA: no file $f"
      continue
    fi
    ts_ca_files+=("$f")
    ts_ca_pem+="$(cat "$f")"$'\n'
  done
}

# DEST (a new directory): the files git tracks, as they are in the working
# tree; nothing untracked (no build trees, no node_modules, no data).
ts_copy_tracked() {
  mkdir -p "$1"
  git ls-files -z | tar --null -T - -c | tar -x -C "$1" ||
    fail "could not copy the files git tracks (a clone with deleted files?)"
}
