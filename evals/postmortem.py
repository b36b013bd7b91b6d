"""The quantitative post-mortem of one replay: its scores per slice, the slices and groups that score
significantly below the rest, the records whose cost lies far beyond the rest, and, for a challenger, the
slices where it wins and loses against a champion on the same records.

What it computes (docs/postmortem.md explains how to read it)
- Slices (`evals.slices`): every declared slice's values, each with n and the decision metrics of its kind
  (`SLICE_METRICS`) with 95% bootstrap intervals (`evals.stats`). Values held by fewer than `min_n` records
  are pooled into one `other (pooled)` value per slice, which lists what it pools; nothing is hidden.
- Outliers: each slice value, each pair of values of two slices (the second level of SliceLine's lattice,
  Sagadeeva & Boehm 2021, with support `min_n`; a pair holding the same records as one of its parts adds
  nothing and is left out), and each group (thread or episode) is tested against the rest of the records:
  one-sided permutation test of the mean objective (`evals.slice_tests.below_rest_p`). A test needs
  `min_n` scored records inside and outside. Benjamini-Hochberg at `fdr` runs within each family (slices,
  pairs, groups); an outlier is a test with q <= fdr.
- Cost: for each measure (tokens, seconds per decision) the records above Tukey's far-out fence.
- Against a champion (`compare_slices`): per slice value, the paired difference of the objective on the same
  records with its bootstrap interval and paired permutation p-value (`evals.stats.paired_mean_difference`),
  Benjamini-Hochberg across the challenger's slice values; "wins" / "loses" when q <= fdr.
The tests treat records as exchangeable, as every interval of the workbench does; turns of one thread are
not independent, which the groups family makes visible rather than corrects.
"""

from __future__ import annotations

import math
from itertools import combinations
from typing import Any, Literal, Mapping, Optional, Sequence

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from .slice_tests import FDR, FENCE_IQRS, below_rest_p, benjamini_hochberg, cost_fence
from .slices import INVALID, MISSING, SLICES, row_values
from .stats import (DEFAULT_RESAMPLES, PERMUTATIONS, MetricValue, PairedComparison, bootstrap_many,
                    paired_mean_difference)

FORMAT_VERSION = 1
SCORE_METRIC = "objective"
MIN_N = 8
POOLED = "other (pooled)"
SLICE_METRICS: dict[str, tuple[str, ...]] = {
    "full_auto": ("objective", "action_accuracy", "cost_weighted_error", "guardrail_override_rate",
                  "parse_failure_rate", "tokens_per_decision"),
    "planner": ("objective", "schema_validity", "pivot_compliance", "improvement_ratio", "parse_failure_rate",
                "tokens_per_decision"),
}
COST_MEASURES: dict[str, str] = {"tokens": "usage.total_tokens", "seconds": "latency_s"}
COST_RECORDS_KEPT = 10
TEST_TEXT = ("one-sided Monte Carlo permutation test of the mean objective inside the slice against the rest "
             "({permutations:,} permutations shared by every test); Benjamini-Hochberg within each family "
             "(slices, pairs, groups) at FDR {fdr:g}")
PAIRED_TEXT = ("paired difference of the objective on the same records per slice value (challenger - champion): "
               "95% bootstrap interval, paired permutation test (exact up to 16 records, else Monte Carlo), "
               "Benjamini-Hochberg across the slice values at FDR {fdr:g}")
COST_TEXT = f"a record's value above Q3 + {FENCE_IQRS:g} x IQR of the program's records (Tukey's far-out fence)"


class SliceStat(BaseModel):
    """One slice value (or pair of values, or group): n, metrics with intervals, its test against the rest."""

    model_config = ConfigDict(extra="forbid")

    family: Literal["slice", "pair", "group"]
    slice: str  # "label"; "label & turn_band" for a pair; "group" for a thread or episode
    value: str
    n: int
    metrics: dict[str, MetricValue] = Field(default_factory=dict)
    diff_vs_rest: Optional[float] = None
    p_value: Optional[float] = None
    q_value: Optional[float] = None
    outlier: bool = False
    pooled: list[str] = Field(default_factory=list)
    untested: str = ""


class CostOutliers(BaseModel):
    """The records of one cost measure above the fence (the costliest first, `COST_RECORDS_KEPT` kept)."""

    model_config = ConfigDict(extra="forbid")

    measure: str
    n: int
    q1: float
    median: float
    q3: float
    iqr: float
    fence: float
    n_outliers: int
    records: list[dict[str, Any]] = Field(default_factory=list)


class PostMortem(BaseModel):
    """Everything `postmortem.json` holds for one replay."""

    model_config = ConfigDict(extra="forbid")

    format_version: int = FORMAT_VERSION
    kind: str
    program: str
    n_records: int
    score_metric: str = SCORE_METRIC
    overall: MetricValue
    min_n: int
    fdr: float
    permutations: int
    seed: int
    n_resamples: int
    test: str
    cost_rule: str = COST_TEXT
    slices: list[SliceStat] = Field(default_factory=list)
    pairs: list[SliceStat] = Field(default_factory=list)
    groups: list[SliceStat] = Field(default_factory=list)
    n_pairs_tested: int = 0
    cost: list[CostOutliers] = Field(default_factory=list)
    missing_slices: list[str] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)

    def outliers(self) -> list[SliceStat]:
        """Slices, pairs and groups scoring significantly below the rest, lowest q first."""
        found = [s for s in (*self.slices, *self.pairs, *self.groups) if s.outlier]
        return sorted(found, key=lambda s: (s.q_value if s.q_value is not None else 1.0, s.diff_vs_rest or 0.0))


class SliceDiff(BaseModel):
    """A challenger minus the champion on one slice value's records."""

    model_config = ConfigDict(extra="forbid")

    slice: str
    value: str
    n: int
    comparison: Optional[PairedComparison] = None
    q_value: Optional[float] = None
    verdict: Literal["wins", "loses", "cannot tell", "untested"] = "untested"
    pooled: list[str] = Field(default_factory=list)
    untested: str = ""


class ChallengerSlices(BaseModel):
    """Where a challenger wins and loses against the champion, slice by slice, paired on the same records."""

    model_config = ConfigDict(extra="forbid")

    challenger: str
    champion: str
    kind: str
    n_records: int
    score_metric: str = SCORE_METRIC
    overall: PairedComparison
    min_n: int
    fdr: float
    test: str
    slices: list[SliceDiff] = Field(default_factory=list)
    missing_slices: list[str] = Field(default_factory=list)

    def verdicts(self, verdict: str) -> list[SliceDiff]:
        """The slice values with this verdict ("wins" / "loses"), lowest q first."""
        return sorted((s for s in self.slices if s.verdict == verdict),
                      key=lambda s: (s.q_value if s.q_value is not None else 1.0))


# ----- shared pieces ------------------------------------------------------------------------------

def _scores(rows: Sequence[Mapping[str, Any]], metric: str = SCORE_METRIC) -> np.ndarray:
    return np.asarray([_float((row.get("scores") or {}).get(metric)) for row in rows], dtype=float)


def _float(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def pooled_values(column: Sequence[str], min_n: int) -> list[tuple[str, np.ndarray, list[str]]]:
    """(value, mask, values pooled) per value of one slice; values under `min_n` records pooled into POOLED."""
    values = np.asarray(column, dtype=object)
    counts: dict[str, int] = {}
    for value in column:
        counts[value] = counts.get(value, 0) + 1
    kept = sorted((v for v, c in counts.items() if c >= min_n), key=lambda v: (-counts[v], v))
    small = sorted(v for v, c in counts.items() if c < min_n)
    groups = [(value, values == value, []) for value in kept]
    if small:
        groups.append((POOLED, np.isin(values, small), small))
    return groups


def _interval_metrics(kind: str, rows: Sequence[Mapping[str, Any]], names: Sequence[str], n_resamples: int,
                      seed: int) -> dict[str, MetricValue]:
    from .replay import statistics

    available = statistics(kind, rows)
    chosen = {name: available[name] for name in names if name in available}
    return bootstrap_many(chosen, len(rows), n_resamples=n_resamples, seed=seed)


def _subset(rows: Sequence[Mapping[str, Any]], mask: np.ndarray) -> list[Mapping[str, Any]]:
    return [row for row, keep in zip(rows, mask) if keep]


# ----- one program ---------------------------------------------------------------------------------

class _Tester:
    """Tests slice masks (over all rows) against the rest on the scored rows; one family at a time."""

    def __init__(self, scores: np.ndarray, min_n: int, fdr: float, seed: int, permutations: int):
        self.scored = np.isfinite(scores)
        self.x = scores[self.scored]
        self.min_n, self.fdr, self.seed, self.permutations = min_n, fdr, seed, permutations

    def why_untested(self, mask: np.ndarray) -> str:
        inside = int(np.count_nonzero(mask & self.scored))
        outside = int(self.x.size) - inside
        if inside < self.min_n:
            return f"{inside} scored record(s) inside, fewer than {self.min_n}"
        if outside < self.min_n:
            return f"{outside} scored record(s) outside, fewer than {self.min_n}"
        return ""

    def run(self, stats: list[SliceStat], masks: list[np.ndarray]) -> None:
        """Fill each stat's difference, p, q and outlier flag (in place)."""
        tested = [i for i, (stat, mask) in enumerate(zip(stats, masks)) if not stat.untested]
        if not tested:
            return
        members = np.stack([masks[i][self.scored] for i in tested], axis=1)
        p = below_rest_p(self.x, members, seed=self.seed, permutations=self.permutations)
        q = benjamini_hochberg(list(p))
        for column, index in enumerate(tested):
            inside = members[:, column]
            stat = stats[index]
            stat.diff_vs_rest = float(self.x[inside].mean() - self.x[~inside].mean())
            stat.p_value, stat.q_value = float(p[column]), q[column]
            stat.outlier = q[column] is not None and q[column] <= self.fdr and stat.diff_vs_rest < 0


def _slice_stats(kind: str, rows: Sequence[Mapping[str, Any]], values: dict[str, list[str]], tester: _Tester,
                 n_resamples: int, seed: int) -> tuple[list[SliceStat], list[np.ndarray]]:
    stats, masks = [], []
    for name, column in values.items():
        for value, mask, pooled in pooled_values(column, tester.min_n):
            metrics = _interval_metrics(kind, _subset(rows, mask), SLICE_METRICS[kind], n_resamples, seed)
            stats.append(SliceStat(family="slice", slice=name, value=value, n=int(mask.sum()), metrics=metrics,
                                   pooled=pooled, untested=tester.why_untested(mask)))
            masks.append(mask)
    tester.run(stats, masks)
    return stats, masks


def _pair_masks(slices: list[SliceStat], masks: list[np.ndarray], min_n: int) -> list[tuple[str, str, np.ndarray]]:
    """Pairs of values of two different slices holding at least `min_n` records, new record sets only."""
    usable = [(s, m) for s, m in zip(slices, masks) if s.value not in (POOLED, MISSING, INVALID)]
    seen: set[bytes] = set()
    pairs = []
    for (a, ma), (b, mb) in combinations(usable, 2):
        if a.slice == b.slice:
            continue
        mask = ma & mb
        key = np.packbits(mask).tobytes()
        if mask.sum() < min_n or key in seen or (mask == ma).all() or (mask == mb).all():
            continue
        seen.add(key)
        pairs.append((f"{a.slice} & {b.slice}", f"{a.value} & {b.value}", mask))
    return pairs


def _family(kind: str, rows: Sequence[Mapping[str, Any]], family: str, entries: list[tuple[str, str, np.ndarray]],
            tester: _Tester, n_resamples: int, seed: int, pooled: Optional[list[list[str]]] = None) -> list[SliceStat]:
    stats = [SliceStat(family=family, slice=name, value=value, n=int(mask.sum()),
                       metrics=_interval_metrics(kind, _subset(rows, mask), (SCORE_METRIC,), n_resamples, seed),
                       pooled=(pooled[i] if pooled else []), untested=tester.why_untested(mask))
             for i, (name, value, mask) in enumerate(entries)]
    tester.run(stats, [mask for _, _, mask in entries])
    return stats


def _cost(rows: Sequence[Mapping[str, Any]]) -> list[CostOutliers]:
    result = []
    for measure, column in COST_MEASURES.items():
        values = np.asarray([_cost_value(row, column) for row in rows], dtype=float)
        fence = cost_fence(values)
        if fence is None:
            continue
        above = np.nonzero(np.isfinite(values) & (values > fence["fence"]))[0]
        order = above[np.argsort(-values[above], kind="stable")]
        records = [{"record_id": rows[i].get("record_id"), "group_id": rows[i].get("group_id"),
                    "value": float(values[i])} for i in order[:COST_RECORDS_KEPT]]
        result.append(CostOutliers(measure=measure, n=int(np.isfinite(values).sum()), n_outliers=int(above.size),
                                   records=records, **fence))
    return result


def _cost_value(row: Mapping[str, Any], column: str) -> float:
    if column.startswith("usage."):
        return _float((row.get("usage") or {}).get(column[len("usage."):]))
    return _float(row.get(column))


def post_mortem(kind: str, rows: Sequence[Mapping[str, Any]], *, program: str = "", min_n: int = MIN_N,
                fdr: float = FDR, n_resamples: int = DEFAULT_RESAMPLES, seed: int = 0,
                permutations: int = PERMUTATIONS, pairs: bool = True) -> PostMortem:
    """The post-mortem of one replay's rows (each with `scores`, `slices` or older columns, `group_id`, usage)."""
    if kind not in SLICE_METRICS:
        raise ValueError(f"unknown kind {kind!r}: full_auto or planner")
    if min_n < 1 or not 0 < fdr < 1:
        raise ValueError(f"min_n must be at least 1 and fdr between 0 and 1 (got {min_n}, {fdr})")
    rows = list(rows)
    values, missing = row_values(rows, kind)
    tester = _Tester(_scores(rows), min_n, fdr, seed, permutations)
    overall = _interval_metrics(kind, rows, (SCORE_METRIC,), n_resamples, seed).get(SCORE_METRIC, MetricValue.empty())
    slices, masks = _slice_stats(kind, rows, values, tester, n_resamples, seed)
    pair_stats = (_family(kind, rows, "pair", _pair_masks(slices, masks, min_n), tester, n_resamples, seed)
                  if pairs else [])
    group_column = [str(row.get("group_id") or MISSING) for row in rows]
    grouped = pooled_values(group_column, min_n)
    groups = _family(kind, rows, "group", [("group", value, mask) for value, mask, _ in grouped], tester,
                     n_resamples, seed, pooled=[p for _, _, p in grouped])
    return PostMortem(kind=kind, program=program, n_records=len(rows), overall=overall, min_n=min_n, fdr=fdr,
                      permutations=permutations, seed=seed, n_resamples=n_resamples,
                      test=TEST_TEXT.format(permutations=permutations, fdr=fdr), slices=slices, pairs=pair_stats,
                      groups=groups, n_pairs_tested=sum(1 for s in pair_stats if not s.untested), cost=_cost(rows),
                      missing_slices=missing, notes=_notes(rows, tester, slices))


def _notes(rows: Sequence[Mapping[str, Any]], tester: _Tester, slices: list[SliceStat]) -> list[str]:
    notes = []
    scored = int(tester.scored.sum())
    if scored < len(rows):
        notes.append(f"{len(rows) - scored} of {len(rows)} records have no {SCORE_METRIC} (no outcome label); "
                     "they count in n and the label-free metrics, not in the tests")
    if slices and all(s.untested for s in slices):
        notes.append(f"no slice value has {tester.min_n} scored records inside and outside: nothing was tested")
    return notes


# ----- against the champion -----------------------------------------------------------------------

def compare_slices(challenger_rows: Sequence[Mapping[str, Any]], champion_rows: Sequence[Mapping[str, Any]],
                   kind: str, *, challenger: str = "challenger", champion: str = "champion", min_n: int = MIN_N,
                   fdr: float = FDR, n_resamples: int = DEFAULT_RESAMPLES, seed: int = 0) -> ChallengerSlices:
    """Challenger minus champion per slice value, paired on the same records; raises ValueError when the
    two replays do not hold the same records."""
    by_id = {row.get("record_id"): row for row in challenger_rows}
    ids = [row.get("record_id") for row in champion_rows]
    if set(ids) != set(by_id) or len(ids) != len(by_id):
        raise ValueError(f"{challenger} and {champion} were not replayed on the same records "
                         f"({len(by_id)} vs {len(ids)} records, {len(set(ids) ^ set(by_id))} differ)")
    aligned = [by_id[record_id] for record_id in ids]
    values, missing = _shared_values(kind, list(champion_rows), aligned)
    a, b = _scores(aligned), _scores(champion_rows)
    options = {"n_resamples": n_resamples, "seed": seed}
    diffs: list[SliceDiff] = []
    for name, column in values.items():
        for value, mask, pooled in pooled_values(column, min_n):
            both = int(np.count_nonzero(mask & np.isfinite(a) & np.isfinite(b)))
            diff = SliceDiff(slice=name, value=value, n=int(mask.sum()), pooled=pooled)
            if both < min_n:
                diff.untested = f"{both} record(s) scored by both, fewer than {min_n}"
            else:
                diff.comparison = paired_mean_difference(a[mask], b[mask], **options)
            diffs.append(diff)
    q = benjamini_hochberg([d.comparison.p_value if d.comparison else None for d in diffs])
    for diff, q_value in zip(diffs, q):
        diff.q_value = q_value
        if diff.comparison is not None and diff.comparison.diff is not None:
            significant = q_value is not None and q_value <= fdr and diff.comparison.diff != 0
            diff.verdict = ("wins" if diff.comparison.diff > 0 else "loses") if significant else "cannot tell"
    return ChallengerSlices(challenger=challenger, champion=champion, kind=kind, n_records=len(ids),
                            overall=paired_mean_difference(a, b, **options), min_n=min_n, fdr=fdr,
                            test=PAIRED_TEXT.format(fdr=fdr), slices=diffs, missing_slices=missing)


def _shared_values(kind: str, champion_rows: list[Mapping[str, Any]],
                   challenger_rows: list[Mapping[str, Any]]) -> tuple[dict[str, list[str]], list[str]]:
    """Slice values of the shared records: the champion's rows, a slice they lack from the challenger's."""
    values, missing = row_values(champion_rows, kind)
    if missing:
        other, still = row_values(challenger_rows, kind)
        values.update({name: column for name, column in other.items() if name in missing})
        missing = still
    return {d.name: values[d.name] for d in SLICES[kind] if d.name in values}, missing
