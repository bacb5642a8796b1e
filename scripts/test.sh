#!/usr/bin/env bash
# Sets up a fresh machine (venv, CPU torch, test tools, chromium) and runs every test.
# Extra arguments go to pytest, e.g. scripts/test.sh -k trace -x
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --dev
exec .venv/bin/python -m pytest "$@"
