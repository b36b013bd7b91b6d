"""The leaderboard: every variant scored on one identical frozen split, ranked, compared and costed.

How a board is made
1. The split is frozen: its hash is recomputed from the stored rows and must equal the one in
   `dataset.json` (for `--split all`, and for a raw log imported on the fly, the split hash is
   computed over all records, as `guidebench eval` does).
2. Every variant replays the same records (`evals.replay`). Results scored earlier join only if
   they carry this exact split (dataset id, split name and hash, record ids): `--results` eval
   folders are refused otherwise (`SplitMismatchError`), and an MLflow compile run's logged
   results stand in for a replay only when they match and used the board's LM (else the variant
   is replayed). A board never mixes splits.
3. Rows are ranked by `objective` (higher is better; equal objectives: cheaper on the cost axis
   first). Every metric keeps its 95% interval (`scipy.stats.bootstrap`: BCa where defined, else
   percentile; the method and resample count are stored with the value).
4. The champion is the variant named by `champion=`, else the one package tagged `champion`
   (or a promoted export), else on a planner board the deployed planner as logged (`planner.logged`), else
   the first row; never a variant that learned from some of the
   board's records (`runtime.provenance.check_overlap`: its row says how many, and a board where
   every variant did is refused). Every row, the champion included, is compared with
   it on the same records (`evals.replay.compare`: the paired difference of every metric with its
   bootstrap interval and the p-value of a paired permutation test, exact up to 16 records and
   Monte Carlo above; McNemar's exact p-value for Full Auto's action accuracy). Each comparison
   names its test and interval method. The champion's own comparison is the identity (difference
   0, p-value 1). A row's verdict is the test's, given only when the difference's interval agrees
   (`models.Comparison.verdict`).
5. Cost per 1,000 decisions from the replay's LM ledgers; the Pareto front is taken on
   (`objective`, cost axis), `total_tokens` by default.
6. A planner board estimates the improvement of the best with one cycles model for every row
   (`--cycles-model`): a stored result scored with another model, or the learned one fit differently, is
   refused in one line naming both (`check_same_cycles`). A record with no improvement estimate has no
   objective (it is left out and counted in the row's notes), so compliance alone never ranks against an
   estimated objective. Its episodes are the unit of every interval and paired test (`evals.replay.compare`;
   fewer than 10 give "too few episodes"). Each row's off-policy estimate (doubly robust, with its interval
   and effective sample size; `evals.offpolicy`) sits next to it.
7. A per-record diff of each challenger against the champion lists the records whose per-record
   `objective` changed (fixed / broken) or whose decision changed at equal score, with inputs and
   both decisions.
"""

from __future__ import annotations

import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Mapping, Optional, Sequence

from evals.offpolicy import OffPolicyEstimate
from evals.replay import COST_METRICS, ReplayResult, compare, replay
from evals.paired import PairedComparison
from runtime.provenance import OverlapCheck, check_overlap

from guidebench import __version__
from guidebench.errors import GuidebenchError
from guidebench.leaderboard.diff import record_diff
from guidebench.leaderboard.models import COST_PER, Comparison, Cost, Leaderboard, LeaderboardRow, OffPolicyCell
from guidebench.leaderboard.postmortem import board_postmortem
from guidebench.leaderboard.results import cycles_mismatch, load_eval_result, reusable_result
from guidebench.leaderboard.split import (
    FrozenSplit,
    ScoredVariant,
    SplitMismatchError,
    check_same_split,
    limit_split,
    load_split,
)
from guidebench.leaderboard.packages import SplitRef, Variant, unique_labels
from guidebench.leaderboard.pareto import pareto_front

__all__ = ["FrozenSplit", "ScoredVariant", "SplitMismatchError", "build_leaderboard", "check_same_split",
           "load_split", "rank", "run_leaderboard", "score_variant", "score_variants"]

RANKING_METRIC = "objective"
DEPLOYED_PLANNER = "planner.logged"
SUITE_KIND = {"full_auto": "full_auto", "fullauto": "full_auto", "planner": "planner", "experiments": "planner"}
COST_AXES: tuple[str, ...] = ("total_tokens", "lm_calls", "seconds", "prompt_tokens", "completion_tokens")


# ----- scoring ----------------------------------------------------------------------------------

def check_compatible(variant: Variant, split: FrozenSplit) -> None:
    """Refuse a variant whose program kind cannot take the split's records."""
    if variant.kind != split.kind:
        raise GuidebenchError(f"variant {variant.label!r} ({variant.origin}) is a {variant.kind} program; "
                              f"the records at {split.data_dir} need {split.kind} programs")
    # Suites name a program kind or a dataset kind; other entries (free text) do not restrict the board.
    suites = {SUITE_KIND[name] for name in variant.manifest.evals if name in SUITE_KIND}
    if suites and split.kind not in suites:
        raise GuidebenchError(f"variant {variant.label!r} declares evals {variant.manifest.evals}; it is not "
                              f"meant to be judged on {split.kind} data")


def score_variant(variant: Variant, split: FrozenSplit, *, threads: int = 1, progress: bool = False,
                  n_resamples: int = 1000, seed: int = 0, cycles: Any = None) -> ScoredVariant:
    """Replay one variant on the frozen split (`cycles`: a planner board's cycles model)."""
    check_compatible(variant, split)
    program = variant.build()
    result = replay(program, split.records, threads=threads, progress=progress, n_resamples=n_resamples,
                    seed=seed, name=variant.label, cycles_model=getattr(cycles, "model", None))
    notes = []
    trained_on = variant.details.get("dataset_id")
    if trained_on and trained_on != split.ref.dataset_id:
        notes.append(f"compiled on dataset {trained_on[:12]}, ranked here on {split.ref.describe()}")
    return ScoredVariant(variant=variant, result=result, split=split.ref, notes=notes)


def score_variants(variants: Sequence[Variant], split: FrozenSplit, *, threads: int = 1, progress: bool = False,
                   n_resamples: int = 1000, seed: int = 0,
                   logged: Optional[Mapping[str, tuple[Optional[ScoredVariant], str]]] = None,
                   on_scored: Optional[Callable[[ScoredVariant], None]] = None,
                   cycles: Any = None) -> list[ScoredVariant]:
    """Score every variant on the same frozen split (compatibility checked before any replay).

    `logged` (`logged_results`): an MLflow compile run that logged results for exactly this split (same
    dataset id, split hash, records and LM) contributes those instead of being replayed.
    """
    for variant in variants:
        check_compatible(variant, split)
    logged = logged or {}
    scored = []
    for variant in variants:
        item, why_not = logged.get(variant.label, (None, ""))
        if item is None:
            item = score_variant(variant, split, threads=threads, progress=progress, n_resamples=n_resamples,
                                 seed=seed, cycles=cycles)
            if variant.details.get("result_artifacts"):
                item.notes.append(f"replayed here: {why_not or 'reuse of logged results is off (--rescore)'}")
        if on_scored is not None:
            on_scored(item)
        scored.append(item)
    return scored


def logged_results(variants: Sequence[Variant], split: FrozenSplit, *, lm: str, n_resamples: int = 1000,
                   seed: int = 0, cycles: Any = None) -> dict[str, tuple[Optional[ScoredVariant], str]]:
    """For each MLflow variant that logged results: (the results standing in for its replay, or None; why not)."""
    return {variant.label: reusable_result(variant, split, lm=lm, tracking_uri=variant.details.get("tracking_uri"),
                                           n_resamples=n_resamples, seed=seed, cycles=cycles)
            for variant in variants if variant.details.get("result_artifacts")}


def check_same_cycles(scored: Sequence[ScoredVariant], cycles: Any) -> None:
    """Refuse, in one line naming both, a planner result scored with another cycles model (or fit) than the board's:
    its objective and improvement metrics were estimated differently, so it is never ranked beside the others."""
    for item in scored:
        mismatch = cycles_mismatch(item, cycles)
        if mismatch:
            raise GuidebenchError(f"refused: {mismatch}")


# ----- assembling the board ---------------------------------------------------------------------

def _objective(item: ScoredVariant) -> Optional[float]:
    metric = item.result.metrics.get(RANKING_METRIC)
    return None if metric is None else metric.value


def rank(scored: Sequence[ScoredVariant], cost_axis: str = "total_tokens") -> list[ScoredVariant]:
    """Order by objective (highest first); equal objectives: cheaper first, then by label; no objective: as given."""
    def key(indexed: tuple[int, ScoredVariant]) -> tuple:
        index, item = indexed
        value = _objective(item)
        if value is None:
            return (1, 0.0, 0.0, "", index)
        return (0, -value, getattr(cost_of(item.result), cost_axis), item.variant.label, index)

    return [item for _, item in sorted(enumerate(scored), key=key)]


def choose_champion(ranked: Sequence[ScoredVariant], champion: Optional[str] = None,
                    learned: Optional[Mapping[str, OverlapCheck]] = None) -> tuple[ScoredVariant, str]:
    """The champion and why: named, else the one tagged/promoted package, else the deployed planner as logged
    (`planner.logged`, on a planner board), else the first row; never a variant that learned from some of the
    board's records (`learned`, by label): a one-line error when it is named, or when every variant did."""
    learned = learned or {}
    barred = [item.variant.label for item in ranked
              if (check := learned.get(item.variant.label)) is not None and check.overlaps]
    if champion:
        for item in ranked:
            if champion in (item.variant.label, item.variant.manifest.name):
                if item.variant.label in barred:
                    raise GuidebenchError(f"--champion {champion!r} refused: {learned[item.variant.label].line()}")
                return item, "named with --champion"
        raise GuidebenchError(f"--champion {champion!r} is not on the board; variants: "
                              + ", ".join(item.variant.label for item in ranked))
    eligible = [item for item in ranked if item.variant.label not in barred]
    if not eligible:
        raise GuidebenchError(f"no variant can be champion: each learned from records of this split "
                              f"({barred[0]}: {learned[barred[0]].line()})")
    not_theirs = (f"; {len(barred)} variant(s) learned from records of this split and cannot be champion: "
                  + ", ".join(barred)) if barred else ""
    tagged = [item for item in eligible if "champion" in item.variant.manifest.tags
              or item.variant.details.get("promotion_state") == "promoted"]
    if len(tagged) == 1:
        return tagged[0], "the package tagged champion / promoted" + not_theirs
    deployed = [item for item in eligible if item.variant.label == DEPLOYED_PLANNER]
    if not tagged and deployed:
        return deployed[0], "the deployed planner as logged (a planner board's default)" + not_theirs
    if _objective(eligible[0]) is None:
        why = "first row as given (no objective)"
    else:
        why = "first row (best objective)" if eligible[0] is ranked[0] else "best objective"
    return eligible[0], why + (f"; {len(tagged)} packages claim to be champion" if len(tagged) > 1 else "") \
        + not_theirs


def cost_of(result: ReplayResult) -> Cost:
    """Cost per 1,000 decisions from the replay's ledgers and latencies."""
    n = max(1, result.n)
    scale = COST_PER / n
    usage = result.summary.get("usage") or {}
    latency = sum(float(row.get("latency_s") or 0.0) for row in result.rows)
    lm_decisions = sum(1 for row in result.rows if (row.get("usage") or {}).get("lm_calls", 0) > 0)
    return Cost(lm_decisions=lm_decisions * scale, lm_calls=usage.get("lm_calls", 0) * scale,
                prompt_tokens=usage.get("prompt_tokens", 0) * scale,
                completion_tokens=usage.get("completion_tokens", 0) * scale,
                total_tokens=usage.get("total_tokens", 0) * scale, seconds=latency * scale,
                wall_seconds=float(result.summary.get("wall_s", 0.0)) * scale,
                cache_hits=usage.get("cache_hits", 0) * scale)


def _aligned(result: ReplayResult, record_ids: Sequence[str]) -> ReplayResult:
    by_id = {row["record_id"]: row for row in result.rows}
    return ReplayResult(kind=result.kind, program=result.program, rows=[by_id[i] for i in record_ids],
                        metrics=result.metrics, summary=result.summary)


def _comparison(against: str, metric: str, paired: PairedComparison, method: Optional[str] = None,
                p_value: Optional[float] = None) -> Comparison:
    return Comparison(against=against, metric=metric, diff=paired.diff, ci_low=paired.ci_low, ci_high=paired.ci_high,
                      p_value=paired.p_value if p_value is None else p_value, n=paired.n,
                      method=method or paired.method, n_permutations=None if method else paired.n_permutations,
                      ci_method=paired.ci_method, n_resamples=paired.n_resamples, n_groups=paired.n_groups)


def compare_with_champion(item: ScoredVariant, champion: ScoredVariant, *, n_resamples: int = 1000,
                          seed: int = 0) -> dict[str, Comparison]:
    """Every metric of a row minus the champion's, paired on the same records; McNemar for Full Auto's binary metric
    (a planner's stays the episode test: McNemar would take its records as independent)."""
    ids = [row["record_id"] for row in champion.result.rows]
    paired = compare(_aligned(item.result, ids), champion.result, n_resamples=n_resamples, seed=seed)
    against = champion.variant.label
    comparisons = {name: _comparison(against, name, value) for name, value in paired["metrics"].items()}
    test = paired["mcnemar"]
    binary = test["metric"]
    if binary in comparisons and champion.result.kind != "planner":  # a planner's unit is the episode, not a record
        comparisons[binary] = _comparison(against, binary, paired["metrics"][binary], method="mcnemar_exact",
                                          p_value=test["p_exact"])
    return comparisons


def _off_policy(item: ScoredVariant, split: FrozenSplit, cycles: Any, seed: int) -> Optional[OffPolicyCell]:
    """The row's headline off-policy estimate, from its records' choices and the dataset's models."""
    if cycles is None or cycles.models is None:
        return None
    from guidebench.evaluation.outcome_models import offpolicy_summary

    ids = [row["record_id"] for row in item.result.rows]
    by_id = {record.record_id: record for record in split.records}
    # replay says whether the program replays the log; an eval folder written before it did, by its name
    replays_log = item.result.summary.get("replays_log", DEPLOYED_PLANNER in (item.variant.label,
                                                                            item.variant.manifest.entry))
    summary = offpolicy_summary([by_id[i] for i in ids], item.result.rows, cycles.models,
                                program=item.variant.label, seed=seed, replays_log=replays_log)
    item.result.summary["off_policy"] = summary
    head = summary["estimates"][summary["headline"]]
    return OffPolicyCell(estimator=head["estimator"], value=head["value"], ci_low=head["ci_low"],
                         ci_high=head["ci_high"], ess=head["ess"], n=head["n"], supported=head["supported"],
                         note=head["note"] + (" (on-policy: the logged choices weigh 1)" if replays_log else ""),
                         all={name: OffPolicyEstimate.model_validate(e).text()
                              for name, e in summary["estimates"].items()},
                         extrapolated=summary["extrapolation"]["by_family"])


def _row_notes(item: ScoredVariant, board: SplitRef) -> tuple[dict[str, float], list[str]]:
    manifest = item.variant.manifest
    notes = list(item.notes)
    expected: dict[str, float] = {}
    if manifest.expected_metrics:
        if manifest.expected_on is not None and manifest.expected_on.same_as(board):
            expected = dict(manifest.expected_metrics)
            for name, value in expected.items():
                measured = item.result.metrics.get(name)
                if measured and measured.ci_low is not None and not (measured.ci_low <= value <= measured.ci_high):
                    notes.append(f"claims {name}={value:.3f}, outside the measured interval "
                                 f"[{measured.ci_low:.3f}, {measured.ci_high:.3f}]")
        else:
            where = manifest.expected_on.describe() if manifest.expected_on else "an unstated split"
            notes.append(f"expected metrics were measured on {where}, not on this board's split; "
                         "they are not shown (results from different splits are never mixed)")
    summary = item.result.summary
    if summary.get("n_errors"):
        notes.append(f"{summary['n_errors']} records raised ({summary.get('errors_by_class')}); scored as failures")
    usage = summary.get("usage") or {}
    if usage.get("cache_hits"):
        notes.append(f"{usage['cache_hits']} of {usage.get('lm_calls', 0)} LM calls came from DSPy's cache: "
                     "tokens and seconds understate a live call (use --no-cache for live costs)")
    if summary.get("logged_enforcement_mismatches"):
        notes.append(f"{summary['logged_enforcement_mismatches']} logged decisions differ from today's guardrails "
                     "(e.g. runs whose run file was missing)")
    return expected, notes


def build_leaderboard(scored: Sequence[ScoredVariant], split: FrozenSplit, *, champion: Optional[str] = None,
                      cost_axis: str = "total_tokens", n_resamples: int = 1000, seed: int = 0, lm: str = "",
                      command: str = "", cycles: Any = None) -> Leaderboard:
    """Rank scored variants on one frozen split into a board (refusing results from any other split)."""
    if cost_axis not in COST_AXES:
        raise GuidebenchError(f"cost axis {cost_axis!r} is not one of {', '.join(COST_AXES)}")
    check_same_split(scored, split.ref, split.record_ids)
    check_same_cycles(scored, cycles)
    ranked = rank(scored, cost_axis)
    learned = {item.variant.label: check_overlap(item.variant.provenance, split.records,
                                                 dataset_id=split.ref.dataset_id, split=split.ref.split)
               for item in ranked}
    champ, rule = choose_champion(ranked, champion, learned)
    costs = [cost_of(item.result) for item in ranked]
    front = set(pareto_front([(_objective(item), getattr(cost, cost_axis)) for item, cost in zip(ranked, costs)]))
    records_by_id = {record.record_id: record for record in split.records}
    rows: list[LeaderboardRow] = []
    for index, (item, cost) in enumerate(zip(ranked, costs)):
        comparisons = compare_with_champion(item, champ, n_resamples=n_resamples, seed=seed)
        expected, notes = _row_notes(item, split.ref)
        notes += (item.result.summary.get("cycles_model") or {}).get("left_out_notes", [])
        check = learned[item.variant.label]
        if check.status != "clean":
            notes.insert(0, ("cannot be champion: " if check.overlaps else "") + check.line())
        manifest = item.variant.manifest
        rows.append(LeaderboardRow(
            rank=index + 1, name=item.variant.label, package=manifest.name, version=manifest.version,
            entry=manifest.entry, source=item.variant.origin, compatible_with=manifest.compatible_with,
            tags=list(manifest.tags), champion=item is champ, pareto=index in front, n=item.result.n,
            errors=item.result.errors, metrics=dict(item.result.metrics), cost=cost,
            comparison=comparisons[RANKING_METRIC],
            comparisons={k: v for k, v in comparisons.items() if k not in COST_METRICS},
            expected=expected, notes=notes, learned_from=check, off_policy=_off_policy(item, split, cycles, seed)))
    diffs = [record_diff(champ.variant.label, champ.result.rows, item.variant.label, item.result.rows,
                         records_by_id, RANKING_METRIC) for item in ranked if item is not champ]
    notes = split.notes + [f"Every variant replayed the same {len(split.records)} records of {split.ref.describe()}."]
    if all(_objective(item) is None for item in ranked) and split.kind == "planner":
        notes.append(f"No record of this split has an improvement estimate by the {getattr(cycles, 'name', 'sim')} "
                     "cycles model, so `objective` is undefined and the rows keep the order they were given (pivot "
                     "compliance alone is not the objective); see the cycles-model notes, or try another "
                     "--cycles-model.")
    elif all(_objective(item) is None for item in ranked):
        notes.append("No record of this split has an outcome label, so `objective` is undefined and the rows keep "
                     "the order they were given; the label-free metrics (guardrail overrides, parse failures, "
                     "errors, agreement with the log) are still compared.")
    return Leaderboard(
        kind=split.kind, dataset_id=split.ref.dataset_id, split=split.ref.split, split_hash=split.ref.split_hash,
        n_records=len(split.records), subset=split.subset, ranking_metric=RANKING_METRIC, cost_axis=cost_axis,
        champion=champ.variant.label, champion_rule=rule,
        created_at=datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"), guidebench_version=__version__,
        lm=lm, rows=rows, pareto=[row.name for row in rows if row.pareto], diffs=diffs,
        notes=notes + (list(cycles.notes) if cycles is not None else []), command=command,
        cycles_model=cycles.estimator if cycles is not None else "",
        postmortem=board_postmortem(ranked, champ, n_resamples=n_resamples, seed=seed, learned=learned))


def _announce(variants: Sequence[Variant], split: FrozenSplit, lm: str) -> None:
    """The one line before any replay: the LM, and what replaying the LM variants on the split costs at most."""
    from guidebench.lm.cost import Scoring, announce

    scorings = []
    for variant in variants:
        if variant.uses_lm:
            try:
                scorings.append(Scoring(variant.label, variant.build(), split.records, split.kind))
            except GuidebenchError:  # its replay reports why, in its turn
                continue
    if scorings:  # no line when nothing here calls the LM
        announce(lm, scorings)


def run_leaderboard(variants: Sequence[Variant], data_dir: Path, split: str = "test", *, threads: int = 1,
                    champion: Optional[str] = None, cost_axis: str = "total_tokens", progress: bool = False,
                    n_resamples: int = 1000, seed: int = 0, lm: str = "", command: str = "",
                    results: Sequence[Path] = (), reuse_logged: bool = True, eval_limit: Optional[int] = None,
                    on_scored: Optional[Callable[[ScoredVariant], None]] = None, cycles_model: str = "auto",
                    ) -> tuple[Leaderboard, list[ScoredVariant]]:
    """Load and verify the split, admit earlier results of the same split (eval folders), score the rest, rank.

    A planner board estimates the improvement with `cycles_model` (`evaluation.outcome_models.cycles_for`) and
    puts every row's off-policy estimate next to it."""
    started = time.perf_counter()
    frozen = limit_split(load_split(data_dir, split), eval_limit)
    cycles = None
    if frozen.kind == "planner":
        from guidebench.evaluation.outcome_models import cycles_for

        cycles = cycles_for(cycles_model, frozen.records, frozen.data_dir, split=frozen.ref.split, seed=seed)
    earlier = [load_eval_result(Path(path), board=frozen.ref, n_resamples=n_resamples, seed=seed) for path in results]
    unique_labels(list(variants) + [item.variant for item in earlier])
    for item in earlier:
        check_compatible(item.variant, frozen)
    # Earlier results are checked before any replay: a refused one should not cost LM calls first.
    if earlier:
        check_same_split(earlier, frozen.ref, frozen.record_ids)
        check_same_cycles(earlier, cycles)
    logged = logged_results(variants, frozen, lm=lm, n_resamples=n_resamples, seed=seed, cycles=cycles) \
        if reuse_logged else {}
    replayed = [variant for variant in variants if logged.get(variant.label, (None, ""))[0] is None]
    if lm and lm != "none":
        _announce(replayed, frozen, lm)  # a variant whose logged results stand in makes no call here
    scored = score_variants(variants, frozen, threads=threads, progress=progress, n_resamples=n_resamples,
                            seed=seed, logged=logged, on_scored=on_scored, cycles=cycles)
    scored += earlier
    board = build_leaderboard(scored, frozen, champion=champion, cost_axis=cost_axis, n_resamples=n_resamples,
                              seed=seed, lm=lm, command=command, cycles=cycles)
    board.notes.append(f"Scored {len(scored)} variants in {time.perf_counter() - started:.1f} s.")
    return board, scored
