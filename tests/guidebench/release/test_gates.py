"""guidebench.release.gates: the default gates, gates files in three formats with clear errors, and each gate's
verdict on a candidate against the champion."""

from __future__ import annotations

from pathlib import Path

import pytest

from guidebench.errors import GuidebenchError
from guidebench.release.gates import GatesConfig, PairedDiff, evaluate_gates, load_gates
from runtime.frozen.manifest import MetricInterval


def test_default_gates_are_the_issue_gates():
    gates = GatesConfig()
    assert (gates.objective, gates.min_objective_delta, gates.max_p_value) == ("objective", 0.0, 0.05)
    assert gates.not_worse("full_auto") == {"guardrail_override_rate": 0.0, "parse_failure_rate": 0.0}
    assert gates.not_worse("planner") == {"parse_failure_rate": 0.0}  # a planner has no guardrails to override
    assert (gates.cost_metric, gates.max_cost_ratio) == ("tokens_per_decision", 1.15)


@pytest.mark.parametrize("name, text", [
    ("gates.toml", 'max_p_value = 0.1\nmax_cost_ratio = 1.3\n[max_increase]\nparse_failure_rate = 0.02\n'),
    ("gates.yaml", "gates:\n  max_p_value: 0.1\n  max_cost_ratio: 1.3\n  max_increase:\n    parse_failure_rate: 0.02\n"),
    ("gates.json", '{"max_p_value": 0.1, "max_cost_ratio": 1.3, "max_increase": {"parse_failure_rate": 0.02}}'),
])
def test_gates_files_in_three_formats(tmp_path: Path, name: str, text: str):
    path = tmp_path / name
    path.write_text(text)
    gates = load_gates(path)
    # the section changes the gate it names; the other default gate stays
    assert (gates.max_p_value, gates.max_cost_ratio) == (0.1, 1.3)
    assert gates.not_worse("full_auto") == {"guardrail_override_rate": 0.0, "parse_failure_rate": 0.02}
    assert gates.objective == "objective"


def test_a_max_increase_section_adds_to_the_default_gates(tmp_path: Path):
    path = tmp_path / "gates.toml"
    path.write_text("[max_increase]\nerror_rate = 0.01\n")
    gates = load_gates(path)
    assert gates.not_worse("full_auto") == {"guardrail_override_rate": 0.0, "parse_failure_rate": 0.0,
                                            "error_rate": 0.01}
    failing = dict(BASE, objective=0.7, parse_failure_rate=0.06, error_rate=0.0)
    checks = {c.gate: c.passed for c in evaluate_gates(gates, _metrics(**failing), _metrics(**BASE, error_rate=0.0),
                                                        {"objective": PairedDiff(diff=0.1, p_value=0.01, n=50)}, 50)}
    assert checks["not_worse:parse_failure_rate"] is False and checks["not_worse:error_rate"] is True


@pytest.mark.parametrize("name, text, message", [
    ("g.toml", "max_p_value = 2\n", "g.toml: field max_p_value: Input should be less than or equal to 1"),
    ("g.toml", "max_pvalue = 0.1\n", "g.toml: field max_pvalue: Extra inputs are not permitted"),
    ("g.toml", "max_p_value = \n", "g.toml: not valid TOML"),
    ("g.yaml", "- a\n- b\n", "g.yaml: gates must be a table / mapping"),
    ("g.ini", "x=1\n", "g.ini: gates file must be .toml, .yaml, .yml or .json"),
    ("g.toml", "[max_increase]\nparse_failures = 0.0\n",
     "g.toml: field max_increase: unknown metric 'parse_failures' (did you mean 'parse_failure_rate'?); "
     "replay measures action_accuracy, brier,"),
    ("g.toml", "[min_values]\nobjectiv = 0.5\n", "g.toml: field min_values: unknown metric 'objectiv'"),
    ("g.toml", 'cost_metric = "tokens"\n', "g.toml: field cost_metric: unknown metric 'tokens'"),
    ("g.toml", 'objective = "accuracy"\n', "g.toml: field objective: unknown metric 'accuracy'"),
])
def test_bad_gates_files_name_the_file_and_field(tmp_path: Path, name: str, text: str, message: str):
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(GuidebenchError) as info:
        load_gates(path)
    assert message in str(info.value)


def _metrics(**values: float) -> dict[str, MetricInterval]:
    return {name: MetricInterval(value=value, n=50) for name, value in values.items()}


BASE = dict(objective=0.60, guardrail_override_rate=0.20, parse_failure_rate=0.05, tokens_per_decision=400.0)


def _verdicts(candidate: dict, champion: dict = BASE, diff=0.1, p=0.01, n=50, **kwargs) -> dict[str, bool]:
    paired = {"objective": PairedDiff(diff=diff, ci_low=diff - 0.05, ci_high=diff + 0.05, p_value=p, n=n)}
    checks = evaluate_gates(GatesConfig(**kwargs.pop("gates", {})), _metrics(**candidate), _metrics(**champion),
                            paired, n, **kwargs)
    assert all(check.reason for check in checks)
    return {check.gate: check.passed for check in checks}


def test_a_better_cheaper_candidate_passes_every_gate():
    verdicts = _verdicts(dict(BASE, objective=0.70, tokens_per_decision=450.0))
    assert all(verdicts.values()) and set(verdicts) == {
        "records", "objective", "not_worse:guardrail_override_rate", "not_worse:parse_failure_rate", "cost"}


@pytest.mark.parametrize("change, kwargs, failing", [
    ({}, {"p": 0.2}, "objective"),                                   # not significant
    ({"objective": 0.55}, {"diff": -0.05, "p": 0.01}, "objective"),  # significantly worse
    ({"guardrail_override_rate": 0.25}, {}, "not_worse:guardrail_override_rate"),
    ({"parse_failure_rate": 0.051}, {}, "not_worse:parse_failure_rate"),
    ({"tokens_per_decision": 461.0}, {}, "cost"),                    # 15.25% above the champion
    ({}, {"n": 10}, "records"),
])
def test_each_gate_fails_on_its_own(change, kwargs, failing):
    verdicts = _verdicts({**BASE, "objective": 0.70, **change}, **kwargs)
    assert [gate for gate, ok in verdicts.items() if not ok] == [failing]


def test_cost_gate_allows_fifteen_percent_and_can_be_moot():
    assert _verdicts(dict(BASE, objective=0.7, tokens_per_decision=460.0))["cost"]
    checks = evaluate_gates(GatesConfig(), _metrics(**dict(BASE, tokens_per_decision=900.0)),
                            _metrics(**dict(BASE, tokens_per_decision=0.0)),
                            {"objective": PairedDiff(diff=0.1, p_value=0.01, n=50)}, 50,
                            cost_uncomparable="the baseline replays the log")
    cost = next(c for c in checks if c.gate == "cost")
    assert cost.passed and "not compared: the baseline replays the log" in cost.reason


def test_absolute_floors_and_missing_metrics_fail_with_reasons():
    verdicts = _verdicts(dict(BASE, objective=0.7), gates={"min_values": {"objective": 0.8}})
    assert verdicts["min:objective"] is False
    checks = evaluate_gates(GatesConfig(), _metrics(objective=0.7), _metrics(objective=0.6), {}, 50)
    reasons = {c.gate: c.reason for c in checks if not c.passed}
    assert reasons["objective"].startswith("objective: no paired comparison")
    assert reasons["cost"].startswith("tokens_per_decision: missing")


def test_a_paired_test_over_too_few_episodes_fails_the_objective_gate_saying_so():
    few = PairedDiff(diff=0.2, ci_low=None, ci_high=None, p_value=None, n=120, method="too_few_groups", n_groups=4)
    checks = evaluate_gates(GatesConfig(), _metrics(**dict(BASE, objective=0.9)), _metrics(**BASE),
                            {"objective": few}, 120)
    objective = next(c for c in checks if c.gate == "objective")
    assert not objective.passed
    assert objective.reason == ("objective: not enough evidence to promote, too few episodes (4 < 10) in the paired "
                                "test (candidate 0.9 on its 50 records vs champion 0.6 on its 50 (means over "
                                "different records); 120 paired records, difference 0.2)")


def test_a_gates_file_asking_for_fewer_records_than_the_test_can_resolve_is_refused(tmp_path: Path):
    gates = tmp_path / "gates.toml"
    gates.write_text("min_records = 3\nmax_p_value = 0.05\n")
    with pytest.raises(GuidebenchError, match=r"min_records = 3 is below .* at least 6 records"):
        load_gates(gates)
    gates.write_text("min_records = 6\nmax_p_value = 0.05\n")
    assert load_gates(gates).min_records == 6


# ----- gates per loop -------------------------------------------------------------------------------

PLANNER = dict(objective=0.60, parse_failure_rate=0.0, tokens_per_decision=0.0)  # no guardrail_override_rate


def test_a_planner_is_gated_without_the_guardrail_gate():
    paired = {"objective": PairedDiff(diff=0.1, p_value=0.01, n=50)}
    checks = evaluate_gates(GatesConfig(), _metrics(**dict(PLANNER, objective=0.7)), _metrics(**PLANNER), paired, 50,
                            kind="planner")
    assert {c.gate: c.passed for c in checks} == {"records": True, "objective": True,
                                                  "not_worse:parse_failure_rate": True, "cost": True}
    # the same metrics judged as a Full Auto module miss its guardrail gate, as before
    full_auto = {c.gate: c.passed for c in evaluate_gates(GatesConfig(), _metrics(**dict(PLANNER, objective=0.7)),
                                                          _metrics(**PLANNER), paired, 50)}
    assert full_auto["not_worse:guardrail_override_rate"] is False


def test_a_gates_file_drops_a_default_gate_and_sets_keys_per_loop(tmp_path: Path):
    path = tmp_path / "gates.toml"
    path.write_text('drop = ["parse_failure_rate"]\nmin_objective_delta = 0.0\n'
                    '[planner]\nmin_objective_delta = 0.02\n'
                    '[full_auto]\ndrop = ["guardrail_override_rate"]\n[full_auto.max_increase]\nerror_rate = 0.01\n')
    gates = load_gates(path)
    planner, full_auto = gates.for_kind("planner"), gates.for_kind("full_auto")
    assert planner.min_objective_delta == 0.02 and planner.not_worse("planner") == {}
    assert full_auto.min_objective_delta == 0.0 and full_auto.not_worse("full_auto") == {"error_rate": 0.01}
    assert full_auto.for_kind("full_auto") == full_auto  # spelt out once, the same gates again
    path.write_text('[max_increase]\nparse_failure_rate = 0.1\n[planner]\ndrop = ["parse_failure_rate"]\n')
    both = load_gates(path)  # the loop's own drop wins over the top level's allowance
    assert both.for_kind("planner").not_worse("planner") == {}
    assert both.for_kind("full_auto").not_worse("full_auto")["parse_failure_rate"] == 0.1
    path.write_text('drop = ["parse_failure_rate"]\n[planner.max_increase]\nparse_failure_rate = 0.2\n')
    back = load_gates(path)  # and its own allowance over the top level's drop
    assert back.for_kind("planner").not_worse("planner") == {"parse_failure_rate": 0.2}
    assert "parse_failure_rate" not in back.for_kind("full_auto").not_worse("full_auto")
    checks = evaluate_gates(gates, _metrics(**dict(PLANNER, objective=0.7, parse_failure_rate=0.5)),
                            _metrics(**PLANNER), {"objective": PairedDiff(diff=0.01, p_value=0.01, n=50)}, 50,
                            kind="planner")
    verdicts = {c.gate: c.passed for c in checks}
    assert "not_worse:parse_failure_rate" not in verdicts  # dropped: a rise of 0.5 is not judged
    assert verdicts["objective"] is False  # +0.01 is below the planner's own min_objective_delta


@pytest.mark.parametrize("text, message", [
    ('drop = ["error_rate"]\n', "'error_rate' is not a default gate; drop names one of guardrail_override_rate, "
                                "parse_failure_rate"),
    ('drop = ["parse_failure_rate"]\n[max_increase]\nparse_failure_rate = 0.1\n',
     "'parse_failure_rate' is both dropped and given an allowance in [max_increase]: keep one"),
    ('[planner]\nmax_p_value = 2\n', "g.toml: field planner.max_p_value: Input should be less than or equal to 1"),
    ('[planner]\nsequential = 1\n', "g.toml: field planner.sequential: Extra inputs are not permitted"),
    ('[planner]\nmin_records = 3\n', "g.toml: field planner: min_records = 3 is below what a paired test can "
                                      "resolve at max_p_value 0.05"),
])
def test_bad_drops_and_loop_tables_are_refused(tmp_path: Path, text: str, message: str):
    path = tmp_path / "g.toml"
    path.write_text(text)
    with pytest.raises(GuidebenchError) as info:
        load_gates(path)
    assert message in str(info.value)


def test_a_gate_on_a_metric_the_loop_does_not_measure_is_refused_for_that_loop(tmp_path: Path):
    path = tmp_path / "g.toml"
    path.write_text("[max_increase]\nguardrail_override_rate = 0.1\n")
    gates = load_gates(path)
    assert gates.for_kind("full_auto").not_worse("full_auto")["guardrail_override_rate"] == 0.1
    refusal = (r"field max_increase.guardrail_override_rate: planner replay does not measure "
               r"'guardrail_override_rate'; move the gate into a \[full_auto\] table")
    with pytest.raises(ValueError, match=refusal):
        gates.for_kind("planner")
    path.write_text("[full_auto.max_increase]\nguardrail_override_rate = 0.1\n")  # where it belongs
    assert load_gates(path).for_kind("planner").not_worse("planner") == {"parse_failure_rate": 0.0}


def test_the_objective_gate_gives_both_means_over_the_paired_records():
    # the candidate scores 656 records, the champion 473: the difference and both means are over the 473 pairs
    paired = {"objective": PairedDiff(diff=0.0206, ci_low=0.01, ci_high=0.03, p_value=0.001, n=473,
                                      value_a=0.7255, value_b=0.7049)}
    candidate = {"objective": MetricInterval(value=0.7301, n=656), "parse_failure_rate": MetricInterval(value=0.0),
                 "tokens_per_decision": MetricInterval(value=0.0)}
    champion = {"objective": MetricInterval(value=0.6569, n=473), "parse_failure_rate": MetricInterval(value=0.0),
                "tokens_per_decision": MetricInterval(value=0.0)}
    checks = {c.gate: c for c in evaluate_gates(GatesConfig(), candidate, champion, paired, 656, kind="planner")}
    objective = checks["objective"]
    assert objective.passed and (objective.candidate, objective.champion) == (0.7255, 0.7049)
    assert objective.reason.startswith("objective passed: candidate 0.7255 vs champion 0.7049 on the same 473 "
                                       "paired records, difference +0.0206 (95% CI 0.01..0.03), paired p = 0.001")
    assert checks["records"].reason == "473 paired records (20 needed)"  # the pairs, not the split's 656 records
