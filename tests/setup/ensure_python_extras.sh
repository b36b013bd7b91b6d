#!/usr/bin/env bash
# Make the Python packages of the scale-out tests importable in the given interpreter's environment:
# psycopg2 (PostgreSQL driver for Optuna and MLflow) and llama-cpp-python's server extra (fastapi,
# uvicorn, sse-starlette, starlette-context, pydantic-settings). Idempotent: installs only what is
# missing, and never rebuilds llama-cpp-python (the installed version satisfies the requirement).
# Usage: ensure_python_extras.sh [PYTHON]   (default: the project's .venv/bin/python)
set -euo pipefail
cd "$(dirname "$0")/../.."
PYTHON="${1:-.venv/bin/python}"

missing=()
"$PYTHON" -c "import psycopg2" 2>/dev/null || missing+=("psycopg2-binary>=2.9,<3")
"$PYTHON" -c "import llama_cpp.server.app" 2>/dev/null || missing+=("llama-cpp-python[server]>=0.3.36,<0.4")
"$PYTHON" -c "import distributed" 2>/dev/null || missing+=("dask[distributed]>=2025.1,<2027")  # the cluster tests

if [ "${#missing[@]}" -eq 0 ]; then
  exit 0
fi

# Shared by every test session on this machine (each has a temp folder of its own), so it is not in TMPDIR.
LOCKS="${XDG_CACHE_HOME:-$HOME/.cache}/guidebench/locks"
mkdir -p "$LOCKS"
LOCK="$LOCKS/ensure-python-extras.lock"
exec 9>"$LOCK"
flock 9 2>/dev/null || true
"$PYTHON" -m pip install -q "${missing[@]}" >&2
