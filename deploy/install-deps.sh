#!/usr/bin/env bash
# deploy/install-deps.sh: installs what tissued needs on Debian 12 and is not
# there yet: the Debian packages for building (and, with --test, for testing;
# with --bench, for the benchmarks under tests/bench/: Bullet as the reference
# peer and a C++ compiler for its glue; with --docker, for
# deploy/docker-check.sh), then the web client's npm packages
# from its lock file. Safe to run again:
# it runs apt-get only when a package is missing and npm ci only when the lock
# file changed since the last install.
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD_PKGS=(build-essential cmake pkg-config libuv1-dev libprotobuf-c-dev protobuf-c-compiler
  libcglm-dev libsqlite3-dev libwslay-dev libhttp-parser-dev libssl-dev libinih-dev check libzstd-dev
  libcjson-dev libmeshoptimizer-dev
  sqlite3)
# haproxy, openssl: the proxy test (tests/integration/proxy.test.mjs); systemd
# (systemd-analyze) and python3-yaml: the checks of deploy/'s files
# the lint of the shell scripts (tests/CMakeLists.txt) needs shellcheck;
# firefox-esr, xvfb, xauth: tests/e2e/firefox.test.mjs (headed Firefox on a
# virtual display: headless it has no WebGL)
TEST_PKGS=(chromium firefox-esr xvfb xauth clang libclang-rt-14-dev libopenmesh-dev haproxy openssl systemd python3-yaml shellcheck)
BENCH_PKGS=(g++ libbullet-dev)
# docker.io (the engine and client), debootstrap (a Debian 12 base image made
# from Debian's archive where no registry is reachable), curl: the container
# check, deploy/docker-check.sh
DOCKER_PKGS=(docker.io debootstrap curl)

want=("${BUILD_PKGS[@]}")
for arg in "$@"; do
  case "$arg" in
  --test) want+=("${TEST_PKGS[@]}") ;;
  --bench) want+=("${BENCH_PKGS[@]}") ;;
  --docker) want+=("${DOCKER_PKGS[@]}") ;;
  *) echo "install-deps: unknown option $arg (use --test, --bench and/or --docker)" >&2; exit 2 ;;
  esac
done
command -v node >/dev/null 2>&1 || want+=(nodejs)
command -v npm >/dev/null 2>&1 || want+=(npm)

missing=()
for p in "${want[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

SUDO=""
if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
if ((${#missing[@]})); then
  echo "install-deps: installing ${missing[*]}"
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q "${missing[@]}"
fi

# npm packages of the web client, exactly as locked
stamp=client-web/node_modules/.lock-stamp
if [[ ! -f "$stamp" ]] || ! cmp -s client-web/package-lock.json "$stamp"; then
  echo "install-deps: npm ci in client-web"
  (cd client-web && npm ci --no-audit --no-fund)
  cp client-web/package-lock.json "$stamp"
fi
