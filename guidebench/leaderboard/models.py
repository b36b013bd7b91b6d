"""Record shapes of a leaderboard: rows, cost, comparisons and per-record diffs (pydantic, one source of truth)."""

from __future__ import annotations

from typing import Any, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field

from evals.offpolicy import FamilySupport
from evals.stats import TOO_FEW_GROUPS, MetricValue, describe_interval, describe_test, too_few_text
from runtime.provenance import OverlapCheck

from guidebench.leaderboard.postmortem import BoardPostMortem

COST_PER = 1000
# Metrics where less is better (for labels and arrows only; ranking always uses `objective`).
LOWER_IS_BETTER: frozenset[str] = frozenset({
    "cost_weighted_error", "guardrail_override_rate", "parse_failure_rate", "error_rate", "brier", "ece",
    "effect_abs_error", "lm_calls_per_decision", "tokens_per_decision", "latency_s_per_decision", "lm_share",
})


def lower_is_better(metric: str) -> bool:
    """True for metrics where a smaller value is the better one (per-rule override rates included)."""
    return metric in LOWER_IS_BETTER or metric.split(".", 1)[0] in LOWER_IS_BETTER


def headline_metric(metric: str) -> bool:
    """True for the quality metrics worth a plot panel (no per-rule breakdowns, no cost-per-decision)."""
    return "." not in metric and not metric.endswith("_per_decision") and metric not in ("cache_hit_rate", "lm_share")


class Cost(BaseModel):
    """What a variant costs per 1,000 decisions."""

    model_config = ConfigDict(extra="forbid")

    per_decisions: int = COST_PER
    # Decisions (of the 1,000) that called an LM at all: a cascade's or a rule-gated program's share sent to its LM.
    lm_decisions: float = 0.0
    lm_calls: float = 0.0
    prompt_tokens: float = 0.0
    completion_tokens: float = 0.0
    total_tokens: float = 0.0
    # Sum of per-decision latencies: what the decisions cost in compute time, whatever the threads.
    seconds: float = 0.0
    # Wall-clock time of the replay, scaled to 1,000 decisions (depends on --threads).
    wall_seconds: float = 0.0
    cache_hits: float = 0.0


ALPHA = 0.05


class Comparison(BaseModel):
    """Paired comparison of one metric, this row minus the champion, on the same records.

    `method` names the test of the p-value (`permutation_exact`, `permutation_monte_carlo`,
    `mcnemar_exact`) and `n_permutations` its assignments; `ci_method` and `n_resamples` the interval's.
    """

    model_config = ConfigDict(extra="forbid")

    against: str
    metric: str
    diff: Optional[float]
    ci_low: Optional[float]
    ci_high: Optional[float]
    p_value: Optional[float]
    n: int
    method: str
    n_permutations: Optional[int] = None
    ci_method: Optional[str] = None
    n_resamples: Optional[int] = None
    # Episodes swapped and resampled as units (a planner board); None when records were the units
    n_groups: Optional[int] = None

    def test(self) -> str:
        """The test behind the p-value in words, e.g. "exact permutation test (8 assignments)"."""
        return describe_test(self.method, None if self.method.startswith("mcnemar") else self.n_permutations,
                             self.n_groups)

    def interval(self) -> str:
        """How the difference's interval was computed, e.g. "BCa bootstrap (1,000 resamples)"."""
        if self.method == TOO_FEW_GROUPS:
            return describe_interval(TOO_FEW_GROUPS, None, self.n_groups)
        return describe_interval(self.ci_method, self.n_resamples, self.n_groups)

    def verdict(self, alpha: float = ALPHA) -> str:
        """Plain words: "better, p = 0.012", "worse, p = 0.030", "cannot tell apart (p = 0.41, n = 30)" or
        "too few episodes (4 < 10)".

        The test decides (p < alpha), and a verdict also needs the difference's own 95% interval to exclude 0:
        where the two disagree the row cannot tell the programs apart and says why, so a verdict never
        contradicts the interval printed beside it."""
        if self.method == TOO_FEW_GROUPS:
            return f"{too_few_text(self.n_groups)}: no verdict"
        if self.diff is None or self.p_value is None:
            return "not compared"
        p = f"p = {self.p_value:.3f}" if self.p_value >= 0.001 else "p < 0.001"
        has_interval = self.ci_low is not None and self.ci_high is not None
        if self.p_value >= alpha or self.diff == 0:
            if has_interval and (self.ci_low > 0 or self.ci_high < 0) and self.diff != 0:
                return f"cannot tell apart ({p}, though the 95% interval excludes 0; n = {self.n})"
            return f"cannot tell apart ({p}, n = {self.n})"
        if has_interval and self.ci_low <= 0 <= self.ci_high:
            return (f"cannot tell apart ({p}, but the 95% interval [{self.ci_low:.3f}, {self.ci_high:.3f}] "
                    f"includes 0; n = {self.n})")
        better = (self.diff < 0) if lower_is_better(self.metric) else (self.diff > 0)
        return f"{'better' if better else 'worse'}, {p}"


class DecisionView(BaseModel):
    """One program's decision on one record, as the leaderboard shows it."""

    model_config = ConfigDict(extra="forbid")

    action: Optional[str] = None
    confidence: Optional[float] = None
    reason: str = ""
    next_input: str = ""
    model_action: Optional[str] = None
    guardrail_rule: Optional[str] = None
    score: Optional[float] = None
    error: Optional[str] = None
    detail: dict[str, Any] = Field(default_factory=dict)


class RecordDiff(BaseModel):
    """A record whose outcome differs between the champion and a challenger."""

    model_config = ConfigDict(extra="forbid")

    record_id: str
    change: Literal["fixed", "broken", "changed"]
    label: Optional[str] = None
    inputs: dict[str, Any] = Field(default_factory=dict)
    champion: DecisionView
    challenger: DecisionView


class ChallengerDiff(BaseModel):
    """Per-record diff of one challenger against the champion."""

    model_config = ConfigDict(extra="forbid")

    champion: str
    challenger: str
    score_metric: str
    fixed: int
    broken: int
    changed: int
    records: list[RecordDiff]


class OffPolicyCell(BaseModel):
    """A row's off-policy estimate of its improvement of the best per record (cycles): the headline estimator's
    value with its interval (None: unsupported, `note` says why), its effective sample size, and every estimator
    in one line each."""

    model_config = ConfigDict(extra="forbid")

    estimator: str
    value: Optional[float]
    ci_low: Optional[float]
    ci_high: Optional[float]
    ess: float
    n: int
    supported: bool
    note: str = ""
    all: dict[str, str] = Field(default_factory=dict)
    # per family the row chose: its records and those extrapolated (propensity under the support threshold)
    extrapolated: dict[str, FamilySupport] = Field(default_factory=dict)

    def extrapolated_text(self) -> str:
        """"break_deps 77% of 52, reduce_loads 0% of 80" (the share of each family's records that rest on the outcome
        model alone), "—" when the row chose no family or the board predates the count."""
        if not self.extrapolated:
            return "—"
        return ", ".join(f"{family.split(':')[-1]} {s.share:.0%} of {s.n}" for family, s in self.extrapolated.items())

    def text(self) -> str:
        """"412.3 [350.1, 470.8]" or "unsupported"."""
        if self.value is None:
            return "unsupported" if not self.supported else "—"
        if self.ci_low is None or self.ci_high is None:
            return f"{self.value:,.1f} ({self.note or 'no interval'})"
        return f"{self.value:,.1f} [{self.ci_low:,.1f}, {self.ci_high:,.1f}]"


class LeaderboardRow(BaseModel):
    """One variant on the board: every metric with its interval, cost, and its comparison with the champion."""

    model_config = ConfigDict(extra="forbid")

    rank: int
    name: str
    package: str
    version: str
    entry: str
    source: str
    compatible_with: str = ""
    tags: list[str] = Field(default_factory=list)
    champion: bool = False
    pareto: bool = False
    n: int
    errors: int = 0
    metrics: dict[str, MetricValue]
    cost: Cost
    comparison: Comparison
    comparisons: dict[str, Comparison] = Field(default_factory=dict)
    expected: dict[str, float] = Field(default_factory=dict)
    notes: list[str] = Field(default_factory=list)
    # How many of the board's records the variant learned from: a row that did cannot be champion.
    learned_from: Optional[OverlapCheck] = None
    # The row's own MLflow run (nested under the board's run when the board is tracked) and its page in the UI.
    mlflow_run_id: Optional[str] = None
    mlflow_url: Optional[str] = None
    # A planner's off-policy estimate of its improvement (None: no outcome model, or not a planner board).
    off_policy: Optional[OffPolicyCell] = None

    def verdict(self) -> str:
        """Plain words: "champion", the comparison's verdict, or that the row is no evidence (it learned from them)."""
        if self.champion:
            return "champion"
        if self.learned_from is not None and self.learned_from.overlaps:
            return f"learned from {self.learned_from.n_overlap} of {self.learned_from.n_records}: no evidence"
        return self.comparison.verdict()


class Leaderboard(BaseModel):
    """A ranked board of variants, all scored on one identical frozen split."""

    model_config = ConfigDict(extra="forbid")

    kind: str
    dataset_id: str
    split: str
    split_hash: str
    n_records: int
    subset: str = ""
    ranking_metric: str = "objective"
    cost_axis: str = "total_tokens"
    champion: str
    champion_rule: str
    created_at: str
    guidebench_version: str
    lm: str = ""
    rows: list[LeaderboardRow]
    pareto: list[str] = Field(default_factory=list)
    diffs: list[ChallengerDiff] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    command: str = ""
    mlflow_run_id: Optional[str] = None
    # A planner board: what estimates cycles_improvement and improvement_ratio ("sim", "learned", ...) and how.
    cycles_model: str = ""
    postmortem: Optional[BoardPostMortem] = None  # slices, outliers, wins and losses (leaderboard.postmortem)

    def row(self, name: str) -> LeaderboardRow:
        """The row of a variant by name."""
        for row in self.rows:
            if row.name == name:
                return row
        raise KeyError(name)

    def metric_names(self) -> list[str]:
        """Every metric on the board, ranking metric first, in the first row's order otherwise."""
        names: list[str] = []
        for row in self.rows:
            names.extend(m for m in row.metrics if m not in names)
        if self.ranking_metric in names:
            names.remove(self.ranking_metric)
            names.insert(0, self.ranking_metric)
        return names
