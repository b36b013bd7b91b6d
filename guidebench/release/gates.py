"""Promotion gates: what a candidate must show against the champion on the same split.

Default gates (the export issue): objective at least the champion's with a paired p-value below
0.05; guardrail-override rate and parse-failure rate not worse; cost per decision at most 15%
above the champion's. A gates file (TOML, YAML or JSON, optionally under a `gates` key) overrides
any of them:

    objective = "objective"          # metric that must improve
    min_objective_delta = 0.0        # candidate - champion must be at least this
    max_p_value = 0.05               # paired p-value of that difference must be below this
    cost_metric = "tokens_per_decision"
    max_cost_ratio = 1.15            # candidate cost <= ratio * champion cost
    min_records = 20                 # paired records needed for any verdict; never below what the
                                     # test can resolve: 2 / 2^n < max_p_value (6 records at 0.05)
    [max_increase]                   # lower-is-better metrics: allowed increase over the champion
    guardrail_override_rate = 0.0
    parse_failure_rate = 0.0
    [min_values]                     # absolute floors, e.g. objective = 0.5
    [sequential]                     # the shadow gate (`guidebench shadow report`), valid at every look
    alpha = 0.05                     # its confidence sequence holds at every look with probability 1 - alpha
    min_effect = 0.0                 # reject once the gain is surely below this (0: once surely worse)
    max_decisions = 5000             # reject at this many labeled decisions without a verdict

A `[max_increase]` section adds gates to those two defaults or changes their allowance; it never drops one
(an allowance of 1.0 lets a rate rise all the way). Every metric name (`objective`, `cost_metric`, the keys of
`[max_increase]` and `[min_values]`) must be one that replay measures: a misspelt name is refused, not a gate
that can never be met or checks nothing.
"""

from __future__ import annotations

import difflib
import json
import math
import tomllib
from pathlib import Path
from typing import Any, Mapping, Optional

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from evals.paired import min_records_for
from evals.stats import TOO_FEW_GROUPS, describe_interval, describe_test, too_few_text
from runtime.frozen.manifest import MetricInterval

from guidebench.errors import GuidebenchError


DEFAULT_MAX_INCREASE: dict[str, float] = {"guardrail_override_rate": 0.0, "parse_failure_rate": 0.0}


def _known_metric(name: str) -> str:
    from guidebench.evaluation.run import metric_names

    known = {*metric_names("full_auto"), *metric_names("planner")}
    if name not in known:
        close = difflib.get_close_matches(name, sorted(known), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ValueError(f"unknown metric {name!r}{hint}; replay measures {', '.join(sorted(known))}")
    return name


class SequentialGates(BaseModel):
    """The shadow gate's settings (`evals.sequential`): `[sequential]` in a gates file."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    alpha: float = Field(default=0.05, gt=0.0, lt=1.0)
    min_effect: float = Field(default=0.0, ge=0.0, le=1.0)
    max_decisions: int = Field(default=5000, ge=1)


class GatesConfig(BaseModel):
    """The promotion gates."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    objective: str = "objective"
    min_objective_delta: float = 0.0
    max_p_value: float = Field(default=0.05, gt=0.0, le=1.0)
    max_increase: dict[str, float] = Field(default_factory=lambda: dict(DEFAULT_MAX_INCREASE))
    cost_metric: str = "tokens_per_decision"
    max_cost_ratio: float = Field(default=1.15, gt=0.0)
    min_values: dict[str, float] = Field(default_factory=dict)
    min_records: int = Field(default=20, ge=1)
    sequential: SequentialGates = Field(default_factory=SequentialGates)

    @field_validator("max_increase", mode="before")
    @classmethod
    def _keeps_the_defaults(cls, value: Any) -> Any:
        # A section naming one metric adds or changes that gate; the default gates stay.
        return {**DEFAULT_MAX_INCREASE, **value} if isinstance(value, dict) else value

    @field_validator("objective", "cost_metric")
    @classmethod
    def _metric(cls, value: str) -> str:
        return _known_metric(value)

    @field_validator("max_increase", "min_values")
    @classmethod
    def _metrics(cls, value: dict[str, float]) -> dict[str, float]:
        for name in value:
            _known_metric(name)
        return value

    @model_validator(mode="after")
    def _resolvable(self) -> "GatesConfig":
        # With n paired records the smallest two-sided p of an exact sign-flip test is 2/2^n: a gate
        # asking for fewer records than that cannot pass on evidence, only on noise.
        needed = min_records_for(self.max_p_value)
        if self.min_records < needed:
            raise ValueError(f"min_records = {self.min_records} is below what a paired test can resolve at "
                             f"max_p_value {self.max_p_value:g}: at least {needed} records (the smallest exact "
                             f"two-sided p with n pairs is 2/2^n)")
        return self


class PairedDiff(BaseModel):
    """Candidate minus champion on the same records, as `evals.paired.PairedComparison` gives it.

    `method` names the test of the p-value and `ci_method` the interval's (None: not recorded).
    """

    model_config = ConfigDict(extra="ignore", allow_inf_nan=False)

    diff: Optional[float] = None
    ci_low: Optional[float] = None
    ci_high: Optional[float] = None
    p_value: Optional[float] = None
    n: int = 0
    method: Optional[str] = None
    n_permutations: Optional[int] = None
    ci_method: Optional[str] = None
    n_resamples: Optional[int] = None
    n_groups: Optional[int] = None  # episodes swapped and resampled as units (None: the records were)

    def describe(self) -> str:
        """The test and interval method in words ("test not recorded" for evidence that did not say)."""
        test = describe_test(self.method, self.n_permutations, self.n_groups) if self.method else "test not recorded"
        interval = (describe_interval(self.ci_method, self.n_resamples, self.n_groups) if self.ci_method
                    else "not recorded")
        return f"{test}; 95% CI: {interval}"


class GateCheck(BaseModel):
    """One gate's verdict with the numbers behind it and a sentence saying why."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    gate: str
    passed: bool
    reason: str
    candidate: Optional[float] = None
    champion: Optional[float] = None
    threshold: Optional[float] = None


def load_gates(path: Optional[Path]) -> GatesConfig:
    """Gates from a TOML, YAML or JSON file (the defaults when path is None)."""
    if path is None:
        return GatesConfig()
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise GuidebenchError(f"{path}: cannot read gates file: {exc.strerror}") from exc
    suffix = path.suffix.lower()
    try:
        if suffix == ".toml":
            data: Any = tomllib.loads(text)
        elif suffix in (".yaml", ".yml"):
            import yaml

            data = yaml.safe_load(text) or {}
        elif suffix == ".json":
            data = json.loads(text)
        else:
            raise GuidebenchError(f"{path}: gates file must be .toml, .yaml, .yml or .json")
    except GuidebenchError:
        raise
    except Exception as exc:  # tomllib, yaml and json each raise their own error type
        raise GuidebenchError(f"{path}: not valid {suffix[1:].upper()}: {' '.join(str(exc).split())}") from exc
    if isinstance(data, dict) and isinstance(data.get("gates"), dict):
        data = data["gates"]
    if not isinstance(data, dict):
        raise GuidebenchError(f"{path}: gates must be a table / mapping")
    try:
        return GatesConfig.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "gates"
        raise GuidebenchError(f"{path}: field {where}: {first['msg'].removeprefix('Value error, ')}") from exc


def _value(metrics: Mapping[str, MetricInterval], name: str) -> Optional[float]:
    metric = metrics.get(name)
    value = metric.value if metric is not None else None
    return value if value is not None and math.isfinite(value) else None


def _fmt(value: Optional[float]) -> str:
    return "n/a" if value is None else f"{value:.4g}"


def _objective_check(gates: GatesConfig, candidate: Mapping[str, MetricInterval],
                     champion: Mapping[str, MetricInterval], paired: Mapping[str, PairedDiff]) -> GateCheck:
    name = gates.objective
    cand, champ = _value(candidate, name), _value(champion, name)
    diff = paired.get(name)
    if diff is not None and diff.method == TOO_FEW_GROUPS:
        # The paired test exists but had too few whole episodes to give a p-value: say so, not "no comparison".
        return GateCheck(gate="objective", passed=False, candidate=cand, champion=champ,
                         reason=f"{name}: not enough evidence to promote, {too_few_text(diff.n_groups)} in the paired "
                                f"test (difference {_fmt(diff.diff)} on {diff.n} records)")
    if cand is None or champ is None or diff is None or diff.diff is None or diff.p_value is None:
        return GateCheck(gate="objective", passed=False, candidate=cand, champion=champ,
                         reason=f"{name}: no paired comparison (candidate {_fmt(cand)}, champion {_fmt(champ)})")
    better = diff.diff >= gates.min_objective_delta
    significant = diff.p_value < gates.max_p_value
    verdict = "passed" if better and significant else "failed"
    why = [] if better else [f"difference {diff.diff:+.4g} < {gates.min_objective_delta:+.4g}"]
    if not significant:
        why.append(f"p = {diff.p_value:.3g} not below {gates.max_p_value:g}")
    return GateCheck(gate="objective", passed=better and significant, candidate=cand, champion=champ,
                     threshold=gates.max_p_value,
                     reason=f"{name} {verdict}: candidate {cand:.4g} vs champion {champ:.4g}, difference "
                            f"{diff.diff:+.4g} (95% CI {_fmt(diff.ci_low)}..{_fmt(diff.ci_high)}), paired "
                            f"p = {diff.p_value:.3g} on {diff.n} records ({diff.describe()})"
                            + (f" — {'; '.join(why)}" if why else ""))


def _not_worse_check(name: str, allowed: float, candidate: Mapping[str, MetricInterval],
                     champion: Mapping[str, MetricInterval]) -> GateCheck:
    cand, champ = _value(candidate, name), _value(champion, name)
    if cand is None or champ is None:
        return GateCheck(gate=f"not_worse:{name}", passed=False, candidate=cand, champion=champ,
                         reason=f"{name}: missing (candidate {_fmt(cand)}, champion {_fmt(champ)})")
    passed = cand <= champ + allowed + 1e-12
    return GateCheck(gate=f"not_worse:{name}", passed=passed, candidate=cand, champion=champ,
                     threshold=champ + allowed,
                     reason=f"{name} {'passed' if passed else 'failed'}: candidate {cand:.4g} vs champion "
                            f"{champ:.4g} (at most {champ + allowed:.4g} allowed)")


def _cost_check(gates: GatesConfig, candidate: Mapping[str, MetricInterval],
                champion: Mapping[str, MetricInterval], uncomparable: Optional[str]) -> GateCheck:
    name = gates.cost_metric
    cand, champ = _value(candidate, name), _value(champion, name)
    if uncomparable:
        return GateCheck(gate="cost", passed=True, candidate=cand, champion=champ,
                         reason=f"{name} not compared: {uncomparable}")
    if cand is None or champ is None:
        return GateCheck(gate="cost", passed=False, candidate=cand, champion=champ,
                         reason=f"{name}: missing (candidate {_fmt(cand)}, champion {_fmt(champ)})")
    limit = champ * gates.max_cost_ratio
    passed = cand <= limit + 1e-12
    return GateCheck(gate="cost", passed=passed, candidate=cand, champion=champ, threshold=limit,
                     reason=f"{name} {'passed' if passed else 'failed'}: candidate {cand:.4g} vs champion "
                            f"{champ:.4g} (at most {limit:.4g} = {gates.max_cost_ratio:g} x champion)")


def evaluate_gates(gates: GatesConfig, candidate: Mapping[str, MetricInterval],
                   champion: Mapping[str, MetricInterval], paired: Mapping[str, PairedDiff],
                   n_records: int, cost_uncomparable: Optional[str] = None) -> list[GateCheck]:
    """Every gate's verdict for a candidate against the champion (or measured baseline) on one split.

    `cost_uncomparable` says why the cost gate does not apply (a baseline that replays the log
    makes no LM call, so it has no measured cost); the gate then passes with that reason.
    """
    enough = n_records >= gates.min_records
    checks = [GateCheck(gate="records", passed=enough, threshold=float(gates.min_records), candidate=float(n_records),
                        reason=f"{n_records} paired records ({gates.min_records} needed)" if enough else
                        f"not enough evidence to promote (n = {n_records}; at least {gates.min_records} needed)")]
    checks.append(_objective_check(gates, candidate, champion, paired))
    for name, allowed in sorted(gates.max_increase.items()):
        checks.append(_not_worse_check(name, allowed, candidate, champion))
    checks.append(_cost_check(gates, candidate, champion, cost_uncomparable))
    for name, floor in sorted(gates.min_values.items()):
        value = _value(candidate, name)
        passed = value is not None and value >= floor
        checks.append(GateCheck(gate=f"min:{name}", passed=passed, candidate=value, threshold=floor,
                                reason=f"{name} {'passed' if passed else 'failed'}: {_fmt(value)} "
                                       f"(at least {floor:g} required)"))
    return checks
