"""Promotion gates: what a candidate must show against the champion on the same split.

Default gates (the export issue): objective at least the champion's with a paired p-value below
0.05; the rates of the module's loop not worse (Full Auto: guardrail-override rate and parse-failure
rate; planner: parse-failure rate, since a planner has no guardrails to override); cost per decision
at most 15% above the champion's. A gates file (TOML, YAML or JSON, optionally under a `gates` key)
overrides any of them:

    objective = "objective"          # metric that must improve
    min_objective_delta = 0.0        # candidate - champion must be at least this
    max_p_value = 0.05               # paired p-value of that difference must be below this
    cost_metric = "tokens_per_decision"
    max_cost_ratio = 1.15            # candidate cost <= ratio * champion cost
    min_records = 20                 # paired records needed for any verdict; never below what the
                                     # test can resolve: 2 / 2^n < max_p_value (6 records at 0.05)
    drop = ["parse_failure_rate"]    # default not-worse gates to drop (none by default)
    [max_increase]                   # lower-is-better metrics: allowed increase over the champion
    parse_failure_rate = 0.0
    [min_values]                     # absolute floors, e.g. objective = 0.5
    [planner]                        # keys for planner modules only (any of the above but sequential);
    min_objective_delta = 0.005      # [full_auto] likewise for Full Auto modules
    [sequential]                     # the shadow gate (`guidebench shadow report`), valid at every look
    alpha = 0.05                     # its confidence sequence holds at every look with probability 1 - alpha
    min_effect = 0.0                 # reject once the gain is surely below this (0: once surely worse)
    max_decisions = 5000             # reject at this many labeled decisions without a verdict

A `[max_increase]` section adds gates to the loop's defaults or changes their allowance; `drop` removes a
default one (an allowance of 1.0 lets a rate rise all the way, but still needs the rate measured). A loop's
table (`[planner]`, `[full_auto]`) replaces the keys it names for that loop; its `[max_increase]` and `drop`
add to the top level's. Every metric name (`objective`, `cost_metric`, the keys of `[max_increase]` and
`[min_values]`) must be one that replay measures: a misspelt name is refused, not a gate that can never be
met or checks nothing; so is, when a module is gated, a name its loop does not measure (`guardrail_override_rate`
for a planner: put it in `[full_auto]`).
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


LOOPS: tuple[str, ...] = ("full_auto", "planner")
# The not-worse gates every module of a loop meets unless a gates file drops one: a planner has no guardrails.
DEFAULT_MAX_INCREASE: dict[str, dict[str, float]] = {
    "full_auto": {"guardrail_override_rate": 0.0, "parse_failure_rate": 0.0},
    "planner": {"parse_failure_rate": 0.0},
}


def _measured(kind: Optional[str] = None) -> set[str]:
    from guidebench.evaluation.run import metric_names

    return {name for loop in ((kind,) if kind else LOOPS) for name in metric_names(loop)}


def _known_metric(name: str) -> str:
    known = _measured()
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


class _Gates(BaseModel):
    """The keys a gates file may set at the top level and in a loop's table."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    objective: str = "objective"
    min_objective_delta: float = 0.0
    max_p_value: float = Field(default=0.05, gt=0.0, le=1.0)
    max_increase: dict[str, float] = Field(default_factory=dict)  # added to (or changing) the loop's defaults
    drop: list[str] = Field(default_factory=list)  # default not-worse gates removed
    cost_metric: str = "tokens_per_decision"
    max_cost_ratio: float = Field(default=1.15, gt=0.0)
    min_values: dict[str, float] = Field(default_factory=dict)
    min_records: int = Field(default=20, ge=1)

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

    @field_validator("drop")
    @classmethod
    def _defaults_only(cls, value: list[str]) -> list[str]:
        defaults = sorted({name for gates in DEFAULT_MAX_INCREASE.values() for name in gates})
        for name in value:
            if name not in defaults:
                raise ValueError(f"{name!r} is not a default gate; drop names one of {', '.join(defaults)} "
                                 "(a gate the file adds itself is removed by deleting its line)")
        return value

    @model_validator(mode="after")
    def _resolvable(self) -> "_Gates":
        # With n paired records the smallest two-sided p of an exact sign-flip test is 2/2^n: a gate
        # asking for fewer records than that cannot pass on evidence, only on noise.
        needed = min_records_for(self.max_p_value)
        if self.min_records < needed:
            raise ValueError(f"min_records = {self.min_records} is below what a paired test can resolve at "
                             f"max_p_value {self.max_p_value:g}: at least {needed} records (the smallest exact "
                             f"two-sided p with n pairs is 2/2^n)")
        both = sorted(set(self.drop) & set(self.max_increase))
        if both:
            raise ValueError(f"{both[0]!r} is both dropped and given an allowance in [max_increase]: keep one")
        return self

    def not_worse(self, kind: str) -> dict[str, float]:
        """The not-worse gates of a loop's module: its defaults, the file's `[max_increase]`, less `drop`."""
        gates = {**DEFAULT_MAX_INCREASE.get(kind, {}), **self.max_increase}
        return {name: allowed for name, allowed in gates.items() if name not in self.drop}


class LoopGates(BaseModel):
    """A loop's table in a gates file (`[planner]`, `[full_auto]`): the keys it names replace the top level's."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    objective: Optional[str] = None
    min_objective_delta: Optional[float] = None
    max_p_value: Optional[float] = None
    max_increase: Optional[dict[str, float]] = None
    drop: Optional[list[str]] = None
    cost_metric: Optional[str] = None
    max_cost_ratio: Optional[float] = None
    min_values: Optional[dict[str, float]] = None
    min_records: Optional[int] = None


class GatesConfig(_Gates):
    """The promotion gates (`for_kind` gives those of one loop's modules)."""

    full_auto: Optional[LoopGates] = None
    planner: Optional[LoopGates] = None
    sequential: SequentialGates = Field(default_factory=SequentialGates)

    @model_validator(mode="after")
    def _loop_tables(self) -> "GatesConfig":
        for kind in LOOPS:  # a loop's table must hold together too, before any module is gated
            if getattr(self, kind) is not None:
                self.for_kind(kind, check_measured=False)
        return self

    def for_kind(self, kind: str, *, check_measured: bool = True) -> "GatesConfig":
        """The gates of a `kind` module: the top level with its loop's table applied, `max_increase` spelt out (the
        defaults kept, `drop` applied). Refuses (ValueError, one line) a metric that loop's replay does not measure."""
        top = self.model_dump(exclude={"full_auto", "planner", "sequential"})
        table = getattr(self, kind, None)
        own = table.model_dump(exclude_none=True) if table is not None else {}
        # the loop's own drop or allowance wins over the top level's allowance or drop of the same gate
        dropped, kept = own.get("drop", []), own.get("max_increase", {})
        allowed = {name: value for name, value in top["max_increase"].items() if name not in dropped}
        merged = {**top, **own, "max_increase": {**allowed, **kept},
                  "drop": sorted({*(name for name in top["drop"] if name not in kept), *dropped})}
        try:
            gates = _Gates.model_validate(merged)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join([kind, *(str(p) for p in first["loc"])])
            raise ValueError(f"field {where}: {first['msg'].removeprefix('Value error, ')}") from None
        named = [("objective", gates.objective), ("cost_metric", gates.cost_metric),
                 *((f"max_increase.{n}", n) for n in gates.max_increase),
                 *((f"min_values.{n}", n) for n in gates.min_values)]
        measured = _measured(kind)
        for where, name in named if check_measured else ():
            if name not in measured:
                other = next(k for k in LOOPS if k != kind)
                raise ValueError(f"field {where}: {kind.replace('_', ' ')} replay does not measure {name!r}; move the "
                                 f"gate into a [{other}] table (or remove it)")
        spelt = gates.model_dump()
        spelt["max_increase"] = gates.not_worse(kind)
        return GatesConfig.model_validate({**spelt, "sequential": self.sequential.model_dump()})


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
    value_a: Optional[float] = None  # the candidate's value on the paired records (None: not recorded)
    value_b: Optional[float] = None  # the champion's

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
        where = ".".join(str(p) for p in first["loc"])
        message = first["msg"].removeprefix("Value error, ")
        # a check of the whole file (a loop's table, min_records against max_p_value) names its own fields
        raise GuidebenchError(f"{path}: field {where}: {message}" if where else f"{path}: {message}") from exc


def _value(metrics: Mapping[str, MetricInterval], name: str) -> Optional[float]:
    metric = metrics.get(name)
    value = metric.value if metric is not None else None
    return value if value is not None and math.isfinite(value) else None


def _fmt(value: Optional[float]) -> str:
    return "n/a" if value is None else f"{value:.4g}"


def _objective_check(gates: GatesConfig, candidate: Mapping[str, MetricInterval],
                     champion: Mapping[str, MetricInterval], paired: Mapping[str, PairedDiff]) -> GateCheck:
    name = gates.objective
    diff = paired.get(name)
    cand, champ, means = _means(name, candidate, champion, diff)
    if diff is not None and diff.method == TOO_FEW_GROUPS:
        # The paired test exists but had too few whole episodes to give a p-value: say so, not "no comparison".
        return GateCheck(gate="objective", passed=False, candidate=cand, champion=champ,
                         reason=f"{name}: not enough evidence to promote, {too_few_text(diff.n_groups)} in the paired "
                                f"test ({means}, difference {_fmt(diff.diff)})")
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
                     reason=f"{name} {verdict}: {means}, difference {diff.diff:+.4g} (95% CI "
                            f"{_fmt(diff.ci_low)}..{_fmt(diff.ci_high)}), paired p = {diff.p_value:.3g} "
                            f"({diff.describe()})" + (f" — {'; '.join(why)}" if why else ""))


def _means(name: str, candidate: Mapping[str, MetricInterval], champion: Mapping[str, MetricInterval],
           diff: Optional[PairedDiff]) -> tuple[Optional[float], Optional[float], str]:
    """(candidate, champion, the words): both programs' values on the paired records the difference is over, or,
    from evidence that did not record them, each program's own value, said to be over different records."""
    if diff is not None and diff.value_a is not None and diff.value_b is not None:
        return diff.value_a, diff.value_b, (f"candidate {diff.value_a:.4g} vs champion {diff.value_b:.4g} on the same "
                                            f"{diff.n} paired records")
    cand, champ = _value(candidate, name), _value(champion, name)
    mine, theirs = candidate.get(name), champion.get(name)
    own = (f"candidate {_fmt(cand)} on its {mine.n if mine else 0} records vs champion {_fmt(champ)} on its "
           f"{theirs.n if theirs else 0} (means over different records)")
    return cand, champ, own + (f"; {diff.n} paired records" if diff is not None else "")


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
                   n_records: int, cost_uncomparable: Optional[str] = None, kind: str = "full_auto") -> list[GateCheck]:
    """Every gate's verdict for a candidate (a `kind` module) against the champion (or measured baseline) on one split.

    `n_records` counts the split's records; the records gate counts the objective's paired records when the paired
    comparison gives them. `cost_uncomparable` says why the cost gate does not apply (a baseline that replays the
    log makes no LM call, so it has no measured cost); the gate then passes with that reason.
    """
    gates = gates.for_kind(kind)
    objective = paired.get(gates.objective)
    if objective is not None:
        n_records = objective.n
    enough = n_records >= gates.min_records
    checks = [GateCheck(gate="records", passed=enough, threshold=float(gates.min_records), candidate=float(n_records),
                        reason=f"{n_records} paired records ({gates.min_records} needed)" if enough else
                        f"not enough evidence to promote (n = {n_records}; at least {gates.min_records} needed)")]
    checks.append(_objective_check(gates, candidate, champion, paired))
    for name, allowed in sorted(gates.not_worse(kind).items()):
        checks.append(_not_worse_check(name, allowed, candidate, champion))
    checks.append(_cost_check(gates, candidate, champion, cost_uncomparable))
    for name, floor in sorted(gates.min_values.items()):
        value = _value(candidate, name)
        passed = value is not None and value >= floor
        checks.append(GateCheck(gate=f"min:{name}", passed=passed, candidate=value, threshold=floor,
                                reason=f"{name} {'passed' if passed else 'failed'}: {_fmt(value)} "
                                       f"(at least {floor:g} required)"))
    return checks
