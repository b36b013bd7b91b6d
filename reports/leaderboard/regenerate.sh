#!/usr/bin/env bash
# Regenerates reports/leaderboard/ (the leaderboard of the committed sample data) and its browser
# screenshot reports/leaderboard.png. Run from anywhere; uses the repository's .venv.
#
#   reports/leaderboard/regenerate.sh                 # baselines + full_auto.predict (embedded model) + packages
#   PROGRAMS=logged,rule,full_auto.always_continue reports/leaderboard/regenerate.sh \
#       --from-mlflow EXPERIMENT --results COMPILE_OUT/baseline
#                                                     # LM rows from a compile's logged test results, no LM call
#
# Extra arguments go to `guidebench leaderboard` as they are.
# The sample logs are imported (seeded, so always the same dataset id and splits) into
# .guidebench/data/sample-fullauto; every variant is ranked on its test split. Compiled variants are
# the package folders under reports/leaderboard/packages/ (see README.md for how they are made).
set -euo pipefail
cd "$(dirname "$0")/../.."

BIN="${BIN:-.venv/bin}"
DATA="${DATA:-.guidebench/data/sample-fullauto}"
PROGRAMS="${PROGRAMS:-logged,rule,full_auto.always_continue,full_auto.predict}"
LM="${LM:-local}"
THREADS="${THREADS:-1}"

if [ ! -f "$DATA/dataset.json" ]; then
  "$BIN/guidebench" data import datasets/sample/fullauto --kind fullauto --out "$DATA"
fi

PACKAGES=()
if compgen -G "reports/leaderboard/packages/*/package.json" >/dev/null; then
  PACKAGES=(--packages reports/leaderboard/packages)
fi

# --no-cache: the cost columns are those of live LM calls, not of DSPy cache hits.
"$BIN/guidebench" leaderboard --data "$DATA" --split test --programs "$PROGRAMS" "${PACKAGES[@]}" \
  --lm "$LM" --no-cache --threads "$THREADS" --out reports/leaderboard "$@"

# Renders the page in headless Chromium and saves reports/leaderboard.png.
"$BIN/python" -m pytest -q tests/test_leaderboard_browser.py -k sample_data
