#!/usr/bin/env bash
# `make test` N times in a row on a fresh clone: the suite must be green on every run, not on most.
#
#   tests/setup/repeat_suite.sh [N] [REF]     (make test-repeat N=3 [REF=HEAD])
#
# Clones this repository's REF (default HEAD, committed work only) into a new temp folder, then runs
# `make test` there N times (default 3); the first run builds the clone's own .venv. Each run's output
# is kept in build/repeat/run-K.log of this checkout, and one line per run says how it ended (its
# exit code, pytest's summary line, and a FOOTPRINT line when the session's temp folder was not left
# empty). Exits 0 only when every run passed; the clone is removed at the end either way.
set -uo pipefail

runs="${1:-3}"
ref="${2:-HEAD}"
here="$(cd "$(dirname "$0")/../.." && pwd)"
logs="$here/build/repeat"
case "$runs" in ''|*[!0-9]*|0) echo "repeat_suite.sh: N must be a whole number above 0, got '$runs'" >&2; exit 2;; esac
commit="$(git -C "$here" rev-parse --verify --quiet "$ref^{commit}")" || {
  echo "repeat_suite.sh: '$ref' is not a commit of $here" >&2; exit 2; }

work="$(mktemp -d "${TMPDIR:-/tmp}/guidebench-repeat-XXXXXXXX")"
trap 'rm -rf "$work"' EXIT
mkdir -p "$logs"
git clone --quiet --no-hardlinks "$here" "$work/clone" && git -C "$work/clone" checkout --quiet "$commit" || {
  echo "repeat_suite.sh: could not clone $here at $commit" >&2; exit 2; }
echo "fresh clone of ${commit:0:12} in $work/clone; make test, $runs run(s); logs in $logs"

failed=0
for k in $(seq 1 "$runs"); do
  start=$(date +%s)
  make -C "$work/clone" test > "$logs/run-$k.log" 2>&1
  code=$?
  summary="$(grep -E '^(=+ )?[0-9]+ (passed|failed)|(passed|failed|error).* in [0-9.]+s' "$logs/run-$k.log" | tail -n 1)"
  footprint="$(grep -m 1 'FOOTPRINT:' "$logs/run-$k.log")"
  ignored="$(grep -c 'Exception ignored' "$logs/run-$k.log")"
  echo "run $k/$runs: exit $code in $(( $(date +%s) - start )) s; ${summary:-no pytest summary}" \
       "${footprint:+; $footprint}; ignored exceptions printed: $ignored"
  [ "$code" -eq 0 ] && [ "$ignored" -eq 0 ] || failed=$((failed + 1))
done
echo "$((runs - failed)) of $runs run(s) passed"
[ "$failed" -eq 0 ]
