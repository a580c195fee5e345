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
  libcjson-dev libmeshoptimizer-dev zlib1g-dev
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

# What is missing, in two groups: the build's packages (and Node.js and npm
# for the web client's packages) take only what they depend on; the
# test, benchmark and container packages also take what they recommend
# (the browsers' fonts and GL drivers, among others). On a bare Debian 12
# the first group is 480 packages instead of 709 with its recommends (git,
# X11 and Mesa libraries, Perl modules, gnupg), and installs in 127 s
# instead of 185 s (2 cores): the README's first command comes a minute
# sooner, and the daemon needs none of those.
missing=()
missing_rec=()
is_installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }
for p in "${want[@]}"; do
  is_installed "$p" && continue
  case " ${BUILD_PKGS[*]} nodejs npm " in
  *" $p "*) missing+=("$p") ;;
  *) missing_rec+=("$p") ;;
  esac
done

SUDO=""
if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
if ((${#missing[@]} + ${#missing_rec[@]})); then
  echo "install-deps: installing ${missing[*]} ${missing_rec[*]}"
  $SUDO apt-get update -q
fi
if ((${#missing[@]})); then
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
if ((${#missing_rec[@]})); then
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q "${missing_rec[@]}"
fi

# npm packages of the web client, exactly as locked
stamp=client-web/node_modules/.lock-stamp
if [[ ! -f "$stamp" ]] || ! cmp -s client-web/package-lock.json "$stamp"; then
  echo "install-deps: npm ci in client-web"
  (cd client-web && npm ci --no-audit --no-fund)
  cp client-web/package-lock.json "$stamp"
fi
