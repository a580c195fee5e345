#!/usr/bin/env bash
# deploy/run.sh: the README's first command. Installs what is missing, builds,
# and runs tissued on its embedded defaults: the SQLite database in ./data,
# the built-in stomach-wall patch, the web client served; it prints the URL.
# Extra arguments go to tissued (see build/server/tissued --help).
set -euo pipefail
cd "$(dirname "$0")/.."
deploy/install-deps.sh
deploy/build.sh build
exec build/server/tissued "$@"
