"""The quantitative post-mortem of one replay: its scores per slice, the slices and groups that score
significantly below the rest, the records whose cost lies far beyond the rest, and, for a challenger, the
slices where it wins and loses against a champion on the same records.

What it computes (docs/postmortem.md explains how to read it)
- Slices (`evals.slices`): every declared slice's values, each with n and the decision metrics of its kind
  (`SLICE_METRICS`) with 95% percentile bootstrap intervals from resamples shared by every slice
  (`evals.slice_tests.mean_intervals`; the overall objective keeps the eval's BCa interval). Values held
  by fewer than `min_n` records are pooled into one `other (pooled)` value per slice, which lists what it
  pools; nothing is hidden.
- Outliers: each slice value, each pair of values of two slices (the second level of SliceLine's lattice,
  Sagadeeva & Boehm 2021, with support `min_n`; a pair holding the same records as one of its parts adds
  nothing and is left out), and each group (thread or episode) is tested against the rest of the records:
  one-sided permutation test of the mean objective (`evals.slice_tests.below_rest_p`). A test needs
  `min_n` scored records inside and outside. Benjamini-Hochberg at `fdr` runs within each family (slices,
  pairs, groups); an outlier is a test with q <= fdr.
- Cost: for each measure (tokens, seconds per decision) the records above Tukey's far-out fence.
- Against a champion (`compare_slices`): per slice value, the paired difference of the objective on the same
  records with its bootstrap interval and paired permutation p-value (`evals.paired.paired_mean_difference`),
  Benjamini-Hochberg across the challenger's slice values; "wins" / "loses" when q <= fdr.
- In-sample (`in_sample`, the one line of `runtime.provenance.OverlapCheck`): when the program (or, against a
  champion, either program) learned from some of the records, the post-mortem says so first and draws no verdict:
  its slices describe a fit, and a challenger's slices are marked "in-sample", never "wins" or "loses".
Full Auto's tests treat records as exchangeable; turns of one thread are not independent, which the groups family
makes visible rather than corrects. A planner's attempts of one episode share its kernel and history: its tests,
intervals and paired slice comparisons take the episode as their unit (`evals.cluster_tests`, `evals.stats`), so a
few unlucky episodes do not show up as a slice scoring below the rest.
"""

from __future__ import annotations

import json
import math
from itertools import combinations
from pathlib import Path
from typing import Any, Literal, Mapping, Optional, Sequence

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from .blas import one_blas_thread
from .cluster_tests import below_rest_p_by_cluster, cluster_codes, why_untested as cluster_untested
from .slice_tests import (FDR, FENCE_IQRS, Tick, below_rest_p, benjamini_hochberg, cost_fence, mean_intervals,
                          membership)
from .slices import INVALID, MISSING, SLICES, row_values
from .paired import PairedComparison, paired_mean_difference
from .progress import progress_bar
from .stats import DEFAULT_RESAMPLES, MIN_GROUPS, PERMUTATIONS, MetricValue, bootstrap_many, mean_of

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
             "(slices, pairs, groups) at FDR {fdr:g}; slice intervals: 95% percentile bootstrap, {resamples:,} "
             "resamples of the whole record set shared by every slice")
CLUSTER_TEST_TEXT = ("by episode (a planner's attempts of one episode are not independent): a slice of whole episodes "
                     "by a one-sided Monte Carlo permutation test of the episodes ({permutations:,} permutations), a "
                     "slice that cuts across episodes by a one-sided t-test of its mean against the rest's with a "
                     "cluster-robust standard error by episode (t with episodes - 1 degrees of freedom); "
                     "Benjamini-Hochberg within each family (slices, pairs, groups) at FDR {fdr:g}; slice intervals: "
                     "95% percentile cluster bootstrap, {resamples:,} resamples of the episodes shared by every slice "
                     "(a group's: of its records)")
PAIRED_TEXT = ("paired difference of the objective on the same records per slice value (challenger - champion): "
               "95% bootstrap interval, paired permutation test (exact up to 16 records, else Monte Carlo), "
               "Benjamini-Hochberg across the slice values at FDR {fdr:g}")
PAIRED_CLUSTER_TEXT = ("; a planner's by episode: the test swaps and the interval resamples whole episodes, and a "
                       f"slice value in fewer than {MIN_GROUPS} episodes gets neither")
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
    in_sample: str = ""  # why these records are not evidence (the program learned from some of them); "" otherwise

    def outliers(self) -> list[SliceStat]:
        """Slices, pairs and groups scoring significantly below the rest, lowest q first."""
        found = [s for s in (*self.slices, *self.pairs, *self.groups) if s.outlier]
        return sorted(found, key=lambda s: (s.q_value if s.q_value is not None else 1.0, s.diff_vs_rest or 0.0))

    def table(self) -> list[dict[str, Any]]:
        """One flat row per slice value, pair and group: n, every metric with its interval, the test."""
        rows = []
        for stat in (*self.slices, *self.pairs, *self.groups):
            row: dict[str, Any] = {"family": stat.family, "slice": stat.slice, "value": stat.value, "n": stat.n}
            for name, metric in stat.metrics.items():
                row.update({name: metric.value, f"{name}.ci_low": metric.ci_low, f"{name}.ci_high": metric.ci_high})
            row.update(diff_vs_rest=stat.diff_vs_rest, p_value=stat.p_value, q_value=stat.q_value,
                       outlier=stat.outlier, pooled=", ".join(stat.pooled), untested=stat.untested)
            rows.append(row)
        return rows


class SliceDiff(BaseModel):
    """A challenger minus the champion on one slice value's records."""

    model_config = ConfigDict(extra="forbid")

    slice: str
    value: str
    n: int
    comparison: Optional[PairedComparison] = None
    q_value: Optional[float] = None
    verdict: Literal["wins", "loses", "cannot tell", "in-sample", "untested"] = "untested"
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
    in_sample: str = ""  # why no verdict is drawn (a program learned from some of the records); "" otherwise

    def verdicts(self, verdict: str) -> list[SliceDiff]:
        """The slice values with this verdict ("wins" / "loses" / "cannot tell"), lowest q first."""
        return sorted((s for s in self.slices if s.verdict == verdict),
                      key=lambda s: (s.q_value if s.q_value is not None else 1.0))

    def leaning(self, sign: int) -> list[SliceDiff]:
        """Slice values whose difference has this sign (-1: lower, +1: higher) without significance, lowest q first."""
        return [s for s in self.verdicts("cannot tell") if s.comparison and (s.comparison.diff or 0) * sign > 0]

    def table(self) -> list[dict[str, Any]]:
        """One flat row per slice value: n, the paired difference with its interval, p, q, verdict."""
        rows = []
        for item in self.slices:
            c = item.comparison
            rows.append({"challenger": self.challenger, "champion": self.champion, "slice": item.slice,
                         "value": item.value, "n": item.n, "diff": c.diff if c else None,
                         "ci_low": c.ci_low if c else None, "ci_high": c.ci_high if c else None,
                         "p_value": c.p_value if c else None, "q_value": item.q_value, "verdict": item.verdict,
                         "pooled": ", ".join(item.pooled), "untested": item.untested})
        return rows


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
    # Each value's mask compares integer codes: comparing the strings once per value grew with values x records
    # (a group per thread).
    index: dict[str, int] = {}
    codes = np.fromiter((index.setdefault(value, len(index)) for value in column), dtype=np.int64, count=len(column))
    tally = np.bincount(codes, minlength=len(index))
    counts = {value: int(tally[code]) for value, code in index.items()}
    kept = sorted((v for v, c in counts.items() if c >= min_n), key=lambda v: (-counts[v], v))
    small = sorted(v for v, c in counts.items() if c < min_n)
    groups = [(value, codes == index[value], []) for value in kept]
    if small:
        groups.append((POOLED, np.isin(codes, [index[value] for value in small]), small))
    return groups


def episodes(kind: str, rows: Sequence[Mapping[str, Any]]) -> Optional[list[str]]:
    """Each row's episode for a planner (the unit its tests and intervals resample), None for Full Auto."""
    if kind != "planner":
        return None
    return [str(row.get("group_id") or row.get("record_id")) for row in rows]


def metric_columns(kind: str, rows: Sequence[Mapping[str, Any]]) -> dict[str, np.ndarray]:
    """The per-record column behind each slice metric (every one is a mean of it; NaN: does not apply)."""
    columns = {name: _scores(rows, name) for name in SLICE_METRICS[kind] if name != "tokens_per_decision"}
    columns["tokens_per_decision"] = np.asarray(
        [_float((row.get("usage") or {}).get("total_tokens", 0)) for row in rows], dtype=float)
    return columns


# ----- one program ---------------------------------------------------------------------------------

class _Tester:
    """Tests slice masks (over all rows) against the rest on the scored rows; by episode when `clusters` (one label
    per row) are given (`evals.cluster_tests`)."""

    def __init__(self, scores: np.ndarray, min_n: int, fdr: float, seed: int, permutations: int,
                 clusters: Optional[Sequence[str]] = None):
        self.scored = np.isfinite(scores)
        self.x = scores[self.scored]
        self.min_n, self.fdr, self.seed, self.permutations = min_n, fdr, seed, permutations
        self.codes = (cluster_codes([label for label, kept in zip(clusters, self.scored) if kept])
                      if clusters is not None else None)

    def why_untested(self, mask: np.ndarray) -> str:
        inside = int(np.count_nonzero(mask & self.scored))
        outside = int(self.x.size) - inside
        if inside < self.min_n:
            return f"{inside} scored record(s) inside, fewer than {self.min_n}"
        if outside < self.min_n:
            return f"{outside} scored record(s) outside, fewer than {self.min_n}"
        return cluster_untested(mask[self.scored], self.codes) if self.codes is not None else ""

    def run(self, families: list[list[tuple[SliceStat, np.ndarray]]], tick: Optional[Tick] = None) -> None:
        """Fill every stat's difference, p, q and outlier flag (in place): one permutation draw for all,
        Benjamini-Hochberg within each family (`tick`: told the permutations done, chunk by chunk)."""
        tested = [(stat, mask[self.scored]) for family in families for stat, mask in family if not stat.untested]
        if not tested:
            return
        members = membership([inside for _, inside in tested], self.x.size).T  # sparse: records x tests
        p = below_rest_p(self.x, members, seed=self.seed, permutations=self.permutations, tick=tick) \
            if self.codes is None else below_rest_p_by_cluster(self.x, members, self.codes, seed=self.seed,
                                                               permutations=self.permutations, tick=tick)
        for (stat, inside), p_value in zip(tested, p):
            stat.diff_vs_rest = float(self.x[inside].mean() - self.x[~inside].mean())
            stat.p_value = float(p_value) if np.isfinite(p_value) else None
        for family in families:
            stats = [stat for stat, _ in family if not stat.untested]
            for stat, q in zip(stats, benjamini_hochberg([stat.p_value for stat in stats])):
                stat.q_value = q
                stat.outlier = q is not None and q <= self.fdr and (stat.diff_vs_rest or 0.0) < 0


def _pair_masks(slices: list[tuple[SliceStat, np.ndarray]], min_n: int) -> list[tuple[str, str, np.ndarray]]:
    """Pairs of values of two different slices holding at least `min_n` records, new record sets only."""
    usable = [(s, m) for s, m in slices if s.value not in (POOLED, MISSING, INVALID)]
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


class _SameRecords:
    """Why a slice value is not tested again: it holds exactly the records of one tested before it."""

    def __init__(self) -> None:
        self.seen: dict[bytes, str] = {}

    def why(self, name: str, value: str, mask: np.ndarray) -> str:
        key = np.packbits(mask).tobytes()
        if key in self.seen:
            return f"the same records as {self.seen[key]}"
        self.seen[key] = f"{name} = {value}"
        return ""


def _stats(family: str, entries: Sequence[tuple[str, str, np.ndarray, list[str]]],
           tester: _Tester) -> list[tuple[SliceStat, np.ndarray]]:
    same = _SameRecords()
    return [(SliceStat(family=family, slice=name, value=value, n=int(mask.sum()), pooled=pooled,
                       untested=tester.why_untested(mask) or same.why(name, value, mask)), mask)
            for name, value, mask, pooled in entries]


def _fill_metrics(families: list[list[tuple[SliceStat, np.ndarray]]], columns: dict[str, np.ndarray], n: int,
                  n_resamples: int, seed: int, tick: Optional[Tick] = None,
                  clusters: Optional[Sequence[str]] = None) -> None:
    """Every slice's metrics with intervals, from one set of bootstrap resamples (one-way slices: every metric of
    the kind; pairs and groups: the objective). With `clusters`, slices and pairs resample whole episodes; the groups
    (an episode, or small ones pooled) still resample records, since an episode drawn whole has one mean."""
    by_units: dict[bool, dict[tuple[int, str], tuple[str, np.ndarray]]] = {True: {}, False: {}}
    for family in families:
        for stat, mask in family:
            names = columns if stat.family == "slice" else (SCORE_METRIC,)
            whole = clusters is not None and stat.family != "group"
            for name in names:
                by_units[whole][(id(stat), name)] = (name, mask)
    values: dict[tuple[int, str], MetricValue] = {}
    for whole, entries in by_units.items():
        if entries:
            units = cluster_codes(clusters) if whole and clusters is not None else None
            values.update(mean_intervals(columns, entries, n, n_resamples=n_resamples, seed=seed, tick=tick,
                                         units=units))
    for family in families:
        for stat, _ in family:
            stat.metrics = {name: values[(id(stat), name)] for name in columns if (id(stat), name) in values}


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
                permutations: int = PERMUTATIONS, pairs: bool = True, in_sample: str = "",
                progress: bool = False) -> PostMortem:
    """The post-mortem of one replay's rows (each with `scores`, `slices` or older columns, `group_id`, usage);
    `in_sample`: why they are not evidence (the program learned from some of them), said first wherever it shows.
    `progress`: a bar with its ETA over the permutations and resamples (what takes the time at 100k records)."""
    if kind not in SLICE_METRICS:
        raise ValueError(f"unknown kind {kind!r}: full_auto or planner")
    if min_n < 1 or not 0 < fdr < 1:
        raise ValueError(f"min_n must be at least 1 and fdr between 0 and 1 (got {min_n}, {fdr})")
    rows = list(rows)
    values, missing = row_values(rows, kind)
    columns = metric_columns(kind, rows)
    clusters = episodes(kind, rows)
    tester = _Tester(columns[SCORE_METRIC], min_n, fdr, seed, permutations, clusters)
    slices = _stats("slice", [(name, value, mask, pooled) for name, column in values.items()
                              for value, mask, pooled in pooled_values(column, min_n)], tester)
    pair_stats = _stats("pair", [(*pair, []) for pair in _pair_masks(slices, min_n)], tester) if pairs else []
    groups = _stats("group", [("group", value, mask, pooled) for value, mask, pooled in
                              pooled_values([str(row.get("group_id") or MISSING) for row in rows], min_n)], tester)
    families = [slices, pair_stats, groups]
    with one_blas_thread(), \
            progress_bar(permutations + n_resamples * (2 if clusters is not None else 1), "post-mortem", progress,
                         unit="draw") as bar:
        tester.run(families, bar.update)  # thousands of small products (evals.blas)
        _fill_metrics(families, columns, len(rows), n_resamples, seed, bar.update, clusters)
        # the program's own objective as metrics.json states it (BCa where defined; by episode for a planner)
        overall = bootstrap_many({SCORE_METRIC: mean_of(columns[SCORE_METRIC])}, len(rows),
                                 n_resamples=n_resamples, seed=seed, groups=clusters)[SCORE_METRIC]
    found = [stat for stat, _ in slices]
    return PostMortem(kind=kind, program=program, n_records=len(rows), overall=overall, min_n=min_n, fdr=fdr,
                      permutations=permutations, seed=seed, n_resamples=n_resamples,
                      test=(CLUSTER_TEST_TEXT if clusters is not None else TEST_TEXT).format(
                          permutations=permutations, fdr=fdr, resamples=n_resamples),
                      slices=found, pairs=[stat for stat, _ in pair_stats], groups=[stat for stat, _ in groups],
                      n_pairs_tested=sum(1 for stat, _ in pair_stats if not stat.untested), cost=_cost(rows),
                      missing_slices=missing, notes=_notes(rows, tester, found), in_sample=in_sample)


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
                   fdr: float = FDR, n_resamples: int = DEFAULT_RESAMPLES, seed: int = 0,
                   in_sample: str = "", progress: bool = False) -> ChallengerSlices:
    """Challenger minus champion per slice value, paired on the same records; raises ValueError when the
    two replays do not hold the same records. With `in_sample` (why the records are not evidence: either program
    learned from some of them), every tested slice's verdict is "in-sample": no win or loss is drawn.
    `progress`: a bar with its ETA over the slice values (each a paired test)."""
    by_id = {row.get("record_id"): row for row in challenger_rows}
    ids = [row.get("record_id") for row in champion_rows]
    if set(ids) != set(by_id) or len(ids) != len(by_id):
        raise ValueError(f"{challenger} and {champion} were not replayed on the same records "
                         f"({len(by_id)} vs {len(ids)} records, {len(set(ids) ^ set(by_id))} differ)")
    aligned = [by_id[record_id] for record_id in ids]
    values, missing = _shared_values(kind, list(champion_rows), aligned)
    a, b = _scores(aligned), _scores(champion_rows)
    options = {"n_resamples": n_resamples, "seed": seed}
    clusters = episodes(kind, champion_rows)  # a planner's slices are compared by episode, as its overall difference
    diffs: list[SliceDiff] = []
    same = _SameRecords()
    entries = [(name, *entry) for name, column in values.items() for entry in pooled_values(column, min_n)]
    with progress_bar(len(entries), "post-mortem against the champion", progress, unit="slice") as bar:
        for name, value, mask, pooled in entries:
            _compare_slice(diffs, same, name, value, mask, pooled, a, b, min_n, options, clusters)
            bar.update(1)
    q = benjamini_hochberg([d.comparison.p_value if d.comparison else None for d in diffs])
    for diff, q_value in zip(diffs, q):
        diff.q_value = q_value
        if diff.comparison is not None and diff.comparison.diff is not None:
            significant = q_value is not None and q_value <= fdr and diff.comparison.diff != 0
            diff.verdict = ("in-sample" if in_sample else ("wins" if diff.comparison.diff > 0 else "loses")
                            if significant else "cannot tell")
    return ChallengerSlices(challenger=challenger, champion=champion, kind=kind, n_records=len(ids),
                            overall=paired_mean_difference(a, b, groups=clusters, **options), min_n=min_n, fdr=fdr,
                            test=PAIRED_TEXT.format(fdr=fdr) + (PAIRED_CLUSTER_TEXT if clusters is not None else ""),
                            slices=diffs, missing_slices=missing,
                            in_sample=in_sample)


def _compare_slice(diffs: list[SliceDiff], same: "_SameRecords", name: str, value: str, mask: np.ndarray,
                   pooled: list[str], a: np.ndarray, b: np.ndarray, min_n: int, options: dict[str, Any],
                   clusters: Optional[Sequence[str]] = None) -> None:
    """One slice value's paired difference (or why it is untested), appended to `diffs`."""
    both = int(np.count_nonzero(mask & np.isfinite(a) & np.isfinite(b)))
    diff = SliceDiff(slice=name, value=value, n=int(mask.sum()), pooled=pooled)
    if both < min_n:
        diff.untested = f"{both} record(s) scored by both, fewer than {min_n}"
    elif mask.all():
        diff.untested = "every record: the overall difference"
    elif why := same.why(name, value, mask):
        diff.untested = why
    else:
        with one_blas_thread():
            groups = [label for label, kept in zip(clusters, mask) if kept] if clusters is not None else None
            diff.comparison = paired_mean_difference(a[mask], b[mask], groups=groups, **options)
    diffs.append(diff)


def _shared_values(kind: str, champion_rows: list[Mapping[str, Any]],
                   challenger_rows: list[Mapping[str, Any]]) -> tuple[dict[str, list[str]], list[str]]:
    """Slice values of the shared records: the champion's rows, a slice they lack from the challenger's."""
    values, missing = row_values(champion_rows, kind)
    if missing:
        other, still = row_values(challenger_rows, kind)
        values.update({name: column for name, column in other.items() if name in missing})
        missing = still
    return {d.name: values[d.name] for d in SLICES[kind] if d.name in values}, missing


def read_postmortem(path: Path) -> PostMortem:
    """The PostMortem in a postmortem.json; raises ValueError (one line) on an unreadable or failed one."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ValueError(f"{path}: unreadable: {exc}") from None
    if isinstance(data, dict) and "error" in data and len(data) == 1:
        raise ValueError(f"{path}: {data['error']}")
    try:
        return PostMortem.model_validate(data)
    except ValueError as exc:
        first = str(exc).splitlines()
        raise ValueError(f"{path}: not a post-mortem of this version ({first[1] if len(first) > 1 else exc})") \
            from None
