#!/usr/bin/env bash
# Regenerates the two committed boards of the sample data on their whole test splits:
#   reports/leaderboard/fullauto/  Full Auto, champion `logged` (the deployed policy; 221 test decisions)
#   reports/leaderboard/planner/   planner, champion planner.rules (seeded 100 of the 141 test iterations)
# and the browser screenshot reports/leaderboard.png. Run from anywhere; uses the repository's .venv.
#
# No row is replayed with the LM here: the LM rows are the whole-test-split results that
#   - the compiles of reports/optimizers.md ("Reproduce") wrote to .guidebench/compiles/<name>/test
#     (full_auto.learned + fit, full_auto.cascade + knn_fewshot, full_auto.hybrid + labeled_fewshot),
#   - the cascade search re-scored for its best trial (.guidebench/searches/cascade-fullauto/test),
#   - the planner.hybrid compiles (their MLflow runs) and the bootstrap_fewshot one's baseline (planner.compact).
# The board refuses a result scored on other records. Rows without an LM (logged, rule, always_continue,
# planner.rules) are replayed. Extra arguments go to both `guidebench leaderboard` calls as they are.
set -euo pipefail
cd "$(dirname "$0")/../.."

BIN="${BIN:-.venv/bin}"
FULLAUTO="${FULLAUTO:-.guidebench/data/opt-fullauto}"
EXPERIMENTS="${EXPERIMENTS:-.guidebench/data/opt-experiments}"
SEARCH="${SEARCH:-.guidebench/searches/cascade-fullauto/test}"

[ -f "$FULLAUTO/dataset.json" ] || "$BIN/guidebench" data import datasets/sample/fullauto --kind fullauto --out "$FULLAUTO"
[ -f "$EXPERIMENTS/dataset.json" ] || "$BIN/guidebench" data import datasets/sample/experiments --kind experiments --out "$EXPERIMENTS"
dataset_id() { "$BIN/python" -c "import json,sys; print(json.load(open(sys.argv[1]))['dataset_id'][:12])" "$1/dataset.json"; }

COMPILES="${COMPILES:-.guidebench/compiles}"
results=()
for compile in fa-learned-fit fa-cascade-knn fa-hybrid-labeled; do
  [ -f "$COMPILES/$compile/test/summary.json" ] && results+=("$COMPILES/$compile/test")
done
[ -f "$SEARCH/summary.json" ] && results+=("$SEARCH")
"$BIN/guidebench" leaderboard --data "$FULLAUTO" --split test --programs logged,rule,full_auto.always_continue \
  --results "${results[@]}" --champion logged --out reports/leaderboard/fullauto --force "$@"

# The planner rows are scored on the seeded 100-record subset of its 141 test iterations that
# `guidebench compile --eval-limit 100` evaluates (a planner decision costs ~6-13 s on two shared cores). The
# champion is the rule planner, the bar every LM planner is measured against; the LM-only planner row is the
# bootstrap_fewshot compile's baseline (planner.compact, uncompiled, on the same records).
PLANNER_BASELINE="${PLANNER_BASELINE:-.guidebench/compiles/opt-planner.hybrid-bootstrap_fewshot/baseline}"
"$BIN/guidebench" leaderboard --data "$EXPERIMENTS" --split test --programs planner.rules \
  --results "$PLANNER_BASELINE" --from-mlflow "guidebench-planner-$(dataset_id "$EXPERIMENTS")" \
  --eval-limit 100 --champion planner.rules --out reports/leaderboard/planner --force "$@"

# Renders the Full Auto page in headless Chromium and saves reports/leaderboard.png.
GUIDEBENCH_SAVE_SCREENSHOT=1 "$BIN/python" -m pytest -q -p no:xdist tests/guidebench/leaderboard/test_render.py -k sample_data
