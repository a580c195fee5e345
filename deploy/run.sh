#!/usr/bin/env bash
# deploy/run.sh: the README's first command. Installs what is missing, builds,
# and runs tissued on its embedded defaults: the SQLite database in ./data,
# the built-in stomach-wall patch, the web client served; it prints the URL.
# Extra arguments go to tissued (see build/server/tissued --help).
set -euo pipefail
cd "$(dirname "$0")/.."
deploy/install-deps.sh
# The programs only (the tests need packages this command does not install).
TS_BUILD_TARGETS="tissued tissuetool tissuectl tissueload" deploy/build.sh build
exec build/server/tissued "$@"
