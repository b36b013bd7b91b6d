"""guidebench.search.engine: SQLite study that resumes, seeded TPE, pruning on dev minibatches, interrupted trials."""

from __future__ import annotations

import json

import dspy
import optuna
import pytest

import programs
from evals import metrics_fullauto
from optimizer_support import decision_examples
from guidebench.search.engine import (SearchConfig, SearchSpace, StudyLMError, open_study, run_search, score_in_minibatches,
                               suggest)

TRAIN = decision_examples(8)
DEV = decision_examples(8, offset=100)
SPACE = SearchSpace(programs=("full_auto.predict",), optimizers=("labeled_fewshot", "knn_fewshot"), demos=(1, 3))


def _config(tmp_path, trials, **kw):
    return SearchConfig(study_name="unit", trials=trials, storage=f"sqlite:///{tmp_path / 'optuna.db'}",
                        minibatch_size=4, n_startup_trials=2, **kw)


def test_sqlite_study_resumes_without_repeating_finished_trials(tmp_path, fake_lm):
    first = run_search(_config(tmp_path, 2), SPACE, TRAIN, DEV, metrics_fullauto.metric, program_factory=programs.get,
                       progress=False)
    assert first.ran_now == 2 and [t.state for t in first.trials] == ["COMPLETE", "COMPLETE"]
    assert (tmp_path / "optuna.db").is_file()
    again = run_search(_config(tmp_path, 3), SPACE, TRAIN, DEV, metrics_fullauto.metric, program_factory=programs.get,
                       progress=False)
    assert again.ran_now == 1 and [t.number for t in again.trials] == [0, 1, 2]
    assert [t.params for t in again.trials[:2]] == [t.params for t in first.trials]
    for trial in again.trials:
        assert trial.params["optimizer"] in SPACE.optimizers and 1 <= trial.params["demos"] <= 3
        assert len(trial.minibatch_means) == 2 and trial.value == trial.minibatch_means[-1]
        assert trial.compile_summary["recipe"] == trial.params["optimizer"]
    state = again.best_state()
    assert state is not None and "decide" in json.dumps(state)


def test_the_study_and_its_trials_record_the_lm_and_another_lm_is_refused(tmp_path, fake_lm):
    lm = {"spec": "fake", "model": "fake/rules", "model_sha256": None}
    first = run_search(_config(tmp_path, 1, lm=lm), SPACE, TRAIN, DEV, metrics_fullauto.metric,
                       program_factory=programs.get, progress=False)
    assert first.lm == lm and [t.lm for t in first.trials] == [lm]
    other = {"spec": "local", "model": "local/gemma-3-270m-q4_k_m", "model_sha256": "ab" * 32}
    with pytest.raises(StudyLMError, match=r"study 'unit' was made with LM 'fake' \(fake/rules\), this search uses "
                                           r"'local' \(local/gemma-3-270m-q4_k_m, model file sha256 abababababab\)"
                       ) as caught:
        run_search(_config(tmp_path, 2, lm=other), SPACE, TRAIN, DEV, metrics_fullauto.metric,
                   program_factory=programs.get, progress=False)
    assert caught.value.recorded == lm
    assert len(optuna.load_study(study_name="unit", storage=f"sqlite:///{tmp_path / 'optuna.db'}").trials) == 1
    # Another spec of the same model and file resumes it.
    again = run_search(_config(tmp_path, 2, lm={**lm, "spec": "fake/rules"}), SPACE, TRAIN, DEV,
                       metrics_fullauto.metric, program_factory=programs.get, progress=False)
    assert again.ran_now == 1 and again.lm == lm


def test_a_study_holding_trials_but_no_lm_is_refused(tmp_path):
    legacy = open_study(_config(tmp_path, 1))  # what a search wrote before studies recorded their LM
    legacy.add_trial(optuna.trial.create_trial(params={}, distributions={}, value=0.5))
    with pytest.raises(StudyLMError, match=r"holds 1 trial\(s\) but records no LM") as caught:
        open_study(_config(tmp_path, 2, lm={"spec": "fake", "model": "fake/rules", "model_sha256": None}))
    assert caught.value.recorded is None


def test_seeded_tpe_draws_the_same_configurations():
    def draws(seed):
        study = open_study(SearchConfig(study_name=f"s{seed}", trials=1, storage="inmemory", seed=seed))
        return [suggest(study.ask(), SPACE) for _ in range(3)]

    assert draws(7) == draws(7)
    assert draws(7) != draws(8)


def test_minibatch_scoring_reports_each_step_and_prunes():
    seen = []
    program = programs.get("full_auto.rules")
    with pytest.raises(optuna.TrialPruned):
        score_in_minibatches(program, DEV, metrics_fullauto.metric, minibatch_size=3,
                             report=lambda mean, step: seen.append((step, mean)) or step == 1)
    assert [step for step, _ in seen] == [0, 1]
    value = score_in_minibatches(program, DEV, metrics_fullauto.metric, minibatch_size=3, report=lambda m, s: False)
    assert 0.0 <= value <= 1.0


class _Broken(dspy.Module):
    def forward(self, **inputs):
        raise RuntimeError("this variant cannot decide")


def test_a_trial_below_the_median_is_pruned_on_dev_minibatches(tmp_path, fake_lm):
    broken = {"on": False}

    def factory(name):
        return _Broken() if broken["on"] else programs.get(name)

    run_search(_config(tmp_path, 2), SPACE, TRAIN, DEV, metrics_fullauto.metric, program_factory=factory,
               progress=False)
    broken["on"] = True
    result = run_search(_config(tmp_path, 3), SPACE, TRAIN, DEV, metrics_fullauto.metric, program_factory=factory,
                        progress=False)
    last = result.trials[-1]
    # Step 0 is warm-up; at step 1 the running mean 0 is below the median of the good trials.
    assert last.state == "PRUNED" and last.minibatch_means == [0.0, 0.0]


def test_an_interrupted_trial_is_not_counted_and_the_search_resumes(tmp_path, fake_lm):
    calls = {"n": 0}

    def factory(name):
        calls["n"] += 1
        if calls["n"] == 2:
            raise KeyboardInterrupt
        return programs.get(name)

    with pytest.raises(KeyboardInterrupt):
        run_search(_config(tmp_path, 3), SPACE, TRAIN, DEV, metrics_fullauto.metric, program_factory=factory,
                   progress=False)
    result = run_search(_config(tmp_path, 3), SPACE, TRAIN, DEV, metrics_fullauto.metric, program_factory=factory,
                        progress=False)
    states = [t.state for t in result.trials]
    assert states.count("COMPLETE") == 3 and states.count("FAIL") == 1 and result.ran_now == 2


def test_a_rule_gated_program_draws_its_rule_gate_and_the_trial_keeps_it(tmp_path, fake_lm):
    from programs.hybrid import RULE_SET_CHOICES, parse_rule_set

    space = SearchSpace(programs=("full_auto.hybrid", "full_auto.compact_state"), optimizers=("labeled_fewshot",),
                        demos=(1, 2))
    result = run_search(_config(tmp_path, 6), space, TRAIN, DEV, metrics_fullauto.metric,
                        program_factory=programs.get, progress=False)
    study = optuna.load_study(study_name="unit", storage=f"sqlite:///{tmp_path / 'optuna.db'}")
    programs_drawn = {t.params["program"] for t in result.trials}
    assert programs_drawn == {"full_auto.hybrid", "full_auto.compact_state"}, "the seeded draws cover both"
    for trial, stored in zip(result.trials, study.trials):
        state = json.loads(stored.user_attrs["program_state"])
        if trial.params["program"] == "full_auto.hybrid":
            assert trial.params["rules"] in RULE_SET_CHOICES
            assert state["rule_gate"] == {"rules": parse_rule_set(trial.params["rules"])}
        else:
            assert "rules" not in trial.params and "rule_gate" not in state
    with pytest.raises(ValueError, match="unknown rule 'finished'"):
        SearchSpace(programs=("full_auto.hybrid",), rule_sets=("turn_failed+finished",))


def test_a_cascade_draws_its_threshold_and_lm_program_and_the_trial_keeps_them(tmp_path, fake_lm):
    space = SearchSpace(programs=("full_auto.cascade", "full_auto.predict"), optimizers=("labeled_fewshot",),
                        demos=(1, 2), thresholds=(0.5, 0.95))
    # the cascade's model is fit on train alone (dev judges the trial): enough threads for it to learn something
    result = run_search(_config(tmp_path, 6), space, decision_examples(24), DEV, metrics_fullauto.metric,
                        program_factory=programs.get, progress=False)
    study = optuna.load_study(study_name="unit", storage=f"sqlite:///{tmp_path / 'optuna.db'}")
    assert all(t.state.name in ("COMPLETE", "PRUNED") for t in study.trials)  # a weak trial may be pruned
    cascades = [t for t in study.trials if t.params["program"] == "full_auto.cascade" and t.state.name == "COMPLETE"]
    assert cascades
    for trial in cascades:
        state = json.loads(trial.user_attrs["program_state"])
        assert 0.5 <= trial.params["threshold"] <= 0.95 and trial.params["lm_program"] in space.lm_programs
        assert state["cascade"] == {"threshold": round(trial.params["threshold"], 2),
                                    "lm_program": trial.params["lm_program"]}
        assert state["trained_model"]["model"]["kind"] == "linear"  # fitted before its LM program was compiled
    assert all("threshold" not in t.params for t in study.trials if t.params["program"] != "full_auto.cascade")
    assert result.best_trial is not None


def test_a_cascade_search_space_is_checked():
    with pytest.raises(ValueError, match="a cascade's LM program is one of"):
        SearchSpace(programs=("full_auto.cascade",), lm_programs=("full_auto.hybrid",))
    with pytest.raises(ValueError, match="thresholds: low 0.9 is above high 0.6"):
        SearchSpace(programs=("full_auto.cascade",), thresholds=(0.9, 0.6))
