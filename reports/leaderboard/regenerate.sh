#!/usr/bin/env bash
# Regenerates the two committed boards of the sample data on their whole test splits:
#   reports/leaderboard/fullauto/  Full Auto, champion `logged` (the deployed policy; 221 test decisions)
#   reports/leaderboard/planner/   planner, champion planner.logged (the 141 test iterations)
# and the browser screenshot reports/leaderboard.png. Run from anywhere; uses the repository's .venv.
#
# No row is replayed with the LM here: the LM rows are the whole-test-split results that
#   - the compiles of reports/optimizers.md ("Reproduce") wrote to .guidebench/compiles/<name>/test
#     (full_auto.learned + fit, full_auto.cascade + knn_fewshot, full_auto.hybrid + labeled_fewshot),
#   - the cascade search re-scored for its best trial (.guidebench/searches/cascade-fullauto/test),
#   - planner.hybrid's eval of the planner test split (made here once when missing, with nice).
# The board refuses a result scored on other records. Rows without an LM (logged, rule, always_continue,
# planner.logged, planner.rules) are replayed. Extra arguments go to both `guidebench leaderboard` calls as they are.
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

# The planner board ranks planner.logged (the deployed planner as logged: the default champion), planner.rules,
# planner.learned (fit on train + dev, its compile's test results) and planner.hybrid (the embedded LM; its eval
# of the whole test split, made once: ~141 LM calls) on the 141 test iterations. The sample's side files carry
# the performance profile, so the simulator estimates cycles_improvement (--cycles-model auto); every row's
# off-policy estimate (doubly robust, with its interval and effective sample size) comes from the outcome and
# propensity models fit on train + dev.
LEARNED="${LEARNED:-$COMPILES/planner-learned-fit}"
HYBRID="${HYBRID:-.guidebench/board-inputs/planner.hybrid-test}"
[ -f "$LEARNED/test/summary.json" ] || "$BIN/guidebench" compile --program planner.learned --optimizer fit \
  --data "$EXPERIMENTS" --out "$LEARNED" --no-progress
[ -f "$HYBRID/summary.json" ] || nice "$BIN/guidebench" eval --program planner.hybrid --data "$EXPERIMENTS" \
  --split test --out "$HYBRID" --no-track --no-progress
"$BIN/guidebench" leaderboard --data "$EXPERIMENTS" --split test --programs planner.logged,planner.rules \
  --results "$LEARNED/test" "$HYBRID" --out reports/leaderboard/planner --force "$@"

# Renders the Full Auto page in headless Chromium and saves reports/leaderboard.png.
GUIDEBENCH_SAVE_SCREENSHOT=1 "$BIN/python" -m pytest -q -p no:xdist tests/guidebench/leaderboard/test_render.py -k sample_data
