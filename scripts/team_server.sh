#!/usr/bin/env bash
# Starts a DuckLake team store on this machine for trying it: a PostgreSQL catalog (Debian's package,
# its own data folder, 127.0.0.1 only) plus a data folder, then the dashboard on it. Other terminals
# and hosts use the two exported values it prints.
#   scripts/team_server.sh [DIR] [dashboard options]   # default DIR .compilewatch-team
#   scripts/team_server.sh stop [DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = "stop" ]; then
    exec .venv/bin/python -m compilewatch.store.pglocal stop "${2:-.compilewatch-team}/postgres"
fi
DIR=${1:-.compilewatch-team}
shift || true
scripts/setup.sh
if ! ls /usr/lib/postgresql/*/bin/initdb > /dev/null 2>&1; then
    if [ "$(id -u)" = 0 ]; then
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql > /dev/null
    else
        echo "team_server: PostgreSQL is not installed; run: sudo apt-get install -y postgresql" >&2
        exit 2
    fi
fi
mkdir -p "$DIR"
DIR=$(cd "$DIR" && pwd)
export COMPILEWATCH_DB=$(.venv/bin/python -m compilewatch.store.pglocal start "$DIR/postgres")
export COMPILEWATCH_DATA_PATH="$DIR/data"
echo "team store running; point other shells at it with:"
echo "  export COMPILEWATCH_DB='$COMPILEWATCH_DB'"
echo "  export COMPILEWATCH_DATA_PATH='$COMPILEWATCH_DATA_PATH'"
echo "stop PostgreSQL with: scripts/team_server.sh stop $DIR"
.venv/bin/compilewatch ingest sample_logs --quiet > /dev/null || true
exec .venv/bin/compilewatch dashboard "$@"
