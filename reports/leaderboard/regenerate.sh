#!/usr/bin/env bash
# Regenerates reports/leaderboard/ (the leaderboard of the committed sample data) and its browser
# screenshot reports/leaderboard.png. Run from anywhere; uses the repository's .venv.
#
#   reports/leaderboard/regenerate.sh     # the committed board: baselines, full_auto.predict (replayed live on
#                                         # the embedded model) and every compile run of the sample data's
#                                         # MLflow experiment (their logged test results, no LM call), all on
#                                         # the seeded 10-record subset of the test split
#   EVAL_LIMIT= FROM_MLFLOW= reports/leaderboard/regenerate.sh   # whole test split, no MLflow rows
#
# The compiled rows need the sample-data compiles in the local MLflow store first (README.md lists
# the commands; `--eval-limit` there must equal EVAL_LIMIT here, or their results are refused).
# Extra arguments go to `guidebench leaderboard` as they are.
# The sample logs are imported (seeded, so always the same dataset id and splits) into
# .guidebench/data/sample-fullauto; every variant is ranked on its test split (the seeded
# EVAL_LIMIT-record subset when EVAL_LIMIT is set). Package folders under reports/leaderboard/packages/,
# if any, are added and replayed (README.md: how they are made; the committed board has none).
set -euo pipefail
cd "$(dirname "$0")/../.."

BIN="${BIN:-.venv/bin}"
DATA="${DATA:-.guidebench/data/sample-fullauto}"
PROGRAMS="${PROGRAMS:-logged,rule,full_auto.always_continue,full_auto.predict}"
LM="${LM:-local}"
EVAL_LIMIT="${EVAL_LIMIT-10}"
FROM_MLFLOW="${FROM_MLFLOW-guidebench-full_auto-bb868ab4d838}"
THREADS="${THREADS:-1}"

if [ ! -f "$DATA/dataset.json" ]; then
  "$BIN/guidebench" data import datasets/sample/fullauto --kind fullauto --out "$DATA"
fi

PACKAGES=()
if compgen -G "reports/leaderboard/packages/*/package.json" >/dev/null; then
  PACKAGES=(--packages reports/leaderboard/packages)
fi

EXTRA=()
if [ -n "$EVAL_LIMIT" ]; then
  EXTRA+=(--eval-limit "$EVAL_LIMIT")
fi
if [ -n "$FROM_MLFLOW" ]; then
  EXTRA+=(--from-mlflow "$FROM_MLFLOW")
fi

# --no-cache: the cost columns of replayed rows are those of live LM calls, not of DSPy cache hits.
"$BIN/guidebench" leaderboard --data "$DATA" --split test --programs "$PROGRAMS" "${PACKAGES[@]}" \
  "${EXTRA[@]}" --lm "$LM" --no-cache --threads "$THREADS" --out reports/leaderboard "$@"

# Renders the page in headless Chromium and saves reports/leaderboard.png.
"$BIN/python" -m pytest -q tests/guidebench/leaderboard/test_render.py -k sample_data
