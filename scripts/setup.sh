#!/usr/bin/env bash
# Creates .venv and installs compilewatch into it. `--dev` adds the collector (CPU torch 2.13.0,
# which pip takes from the machine's local wheel store), the trainers the callbacks are tested with
# (pytorch-lightning, transformers, accelerate), the test tools, and Debian's chromium for the
# browser test. Safe to run again: it only installs what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
    "$PY" -m venv .venv
    .venv/bin/python -m pip install -q --upgrade pip
fi
if [ "${1:-}" = "--dev" ]; then
    # the trainer callbacks' tests run real Lightning and Hugging Face Trainer jobs (pure Python wheels)
    .venv/bin/python -m pip install -q -e ".[collect,dev,lightning,transformers]"
    # PostgreSQL from Debian: the catalog of the DuckLake team store in its tests (started in a temp folder)
    if ! ls /usr/lib/postgresql/*/bin/initdb > /dev/null 2>&1; then
        if [ "$(id -u)" = 0 ]; then
            (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql) >/dev/null \
                || echo "setup: could not install postgresql; the DuckLake tests will be skipped" >&2
        else
            echo "setup: PostgreSQL missing and not root; the DuckLake tests will be skipped" >&2
        fi
    fi
    if [ ! -x /usr/bin/chromium ]; then
        if [ "$(id -u)" = 0 ]; then
            (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium) >/dev/null \
                || echo "setup: could not install chromium; the browser test will be skipped" >&2
        else
            echo "setup: /usr/bin/chromium missing and not root; the browser test will be skipped" >&2
        fi
    fi
else
    .venv/bin/python -m pip install -q -e .
fi
# Bytecode, as a wheel install writes it: an editable install leaves it to each run, and a shell with
# PYTHONDONTWRITEBYTECODE=1 then compiles every imported module again at every command (~0.1 s).
# The folders with an __init__.py at the top are the package's rooms (pyproject's package-dir).
.venv/bin/python -m compileall -q $(dirname */__init__.py) > /dev/null
# setup.py builds the text reader's loop in C where it can and goes on where it cannot: say so.
if ! .venv/bin/python -c "import compilewatch.ingest.text._skim" 2> /dev/null; then
    echo "setup: the TORCH_LOGS reader's C loop was not built (no C compiler or Python headers:" \
         "apt-get install gcc python3-dev); text logs are read by the same rules in Python, ~20% slower" >&2
fi
