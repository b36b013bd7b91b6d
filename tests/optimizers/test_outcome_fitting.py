"""Fitting the outcome and propensity models: what they are fit on, that the exported JSON scores as scikit-learn
does, and a clear line (or a documented fallback) for every kind of log a model cannot be fit on."""

from __future__ import annotations

import numpy as np
import pytest

from evals.offpolicy.bandit import training_data, attempt_of
from optimizers.outcome_fitting import (MAX_WORKERS, MIN_ATTEMPTS, OutcomeFitError, OutcomeFitSettings, _Candidate,
                                        fit_outcome_models, fit_workers, usable_data)
from planner_logs_support import entry, record, records_of
from runtime.advisor import FAMILIES
from runtime.outcome import OutcomeModel, Scorer
from runtime.outcome_features import ROW_NAMES

SCHEDULE, LOADS, DEPS = FAMILIES


def episodes(n_episodes=6, length=10, *, families=FAMILIES, valid=True, cycles=True, scale=1):
    """Hand-made attempts: each family takes a different share of the best, so a model has something to learn."""
    share = {SCHEDULE: 0.03, LOADS: 0.01, DEPS: 0.0}
    records = []
    for e in range(n_episodes):
        best, lines = 10_000 * scale * (1 + e), []
        for i in range(1, length + 1):
            family = families[(i + e) % len(families)]
            after = round(best * (1 - share[family] * (i % 3 != 0)))
            line = entry(i, family, valid=valid and i % 5 != 0, best_before=best,
                         cycles=(after if cycles else None) if valid and i % 5 != 0 else None)
            records.append(record(f"ep{e}", i, lines, line))
            lines.append(line)
            if line["new_best"]:
                best = after
    return records


def test_the_fit_records_what_it_was_fit_on(outcome_fit, profile_free_dataset):
    train, dev = records_of(profile_free_dataset, "train"), records_of(profile_free_dataset, "dev")
    chosen = outcome_fit.chosen
    assert chosen["n_train"] == len(train) and chosen["n_dev"] == len(dev)
    assert set(outcome_fit.trained_on) <= {r.record_id for r in train + dev}
    assert chosen["attempts"] == len(outcome_fit.trained_on) and chosen["episodes"] >= 2
    assert outcome_fit.outcome.fit_info == chosen and len(chosen["trained_on_sha256"]) == 64
    test_ids = {r.record_id for r in records_of(profile_free_dataset, "test")}
    assert not test_ids & set(outcome_fit.trained_on)


def test_each_familys_estimates_are_scaled_to_what_its_attempts_brought_on_held_out_episodes():
    fit = fit_outcome_models(episodes())
    scale = fit.outcome.family_scale
    assert set(scale) == set(FAMILIES) and all(0.5 <= v <= 2.0 for v in scale.values())
    assert scale[DEPS] == 0.5  # deps never gains: whatever the trees lend it from the others is scaled back (clipped)
    assert fit.chosen["family_scale"] == scale
    assert fit.outcome.to_state()["family_scale"] == scale


def test_the_fit_is_deterministic():
    first, again = fit_outcome_models(episodes()), fit_outcome_models(episodes())
    assert again.outcome.to_state() == first.outcome.to_state()
    assert again.propensity.to_state() == first.propensity.to_state()


def test_the_fit_is_the_same_on_one_thread_as_on_several():
    # Every fold fit and refit is seeded and independent: the threads only change when each one runs.
    records = episodes(n_episodes=8, valid=True)
    one = fit_outcome_models(records, workers=1)
    several = fit_outcome_models(records, workers=3)
    assert several.outcome.to_state() == one.outcome.to_state()
    assert several.propensity.to_state() == one.propensity.to_state()
    assert several.grid == one.grid and several.chosen == one.chosen
    assert {row["target"] for row in one.grid} == {"gain", "valid"}  # both selections ran, in the same pool


def test_records_streamed_once_fit_what_a_list_fits_and_examples_are_served_by_their_ids():
    import programs
    from optimizers.outcome_fitting import _FITTED, fit_outcome_models_once

    records = episodes(n_episodes=8)
    listed = fit_outcome_models(records[:60], records[60:])
    streamed = fit_outcome_models(iter(records[:60]), iter(records[60:]))  # read one at a time, never held
    assert streamed.outcome.to_state() == listed.outcome.to_state() and streamed.chosen == listed.chosen
    assert streamed.chosen["n_train"] == 60 and streamed.chosen["n_dev"] == len(records) - 60
    _FITTED.clear()
    once = fit_outcome_models_once(iter(records[:60]), iter(records[60:]))
    assert once.outcome.to_state() == listed.outcome.to_state()
    # the fit recipe's examples name the same records: served from the fit above, their packets never parsed
    examples = [programs.planner_example(r) for r in records]
    for example in examples:
        example["packet"] = "not JSON: would fail if it were read"
    assert fit_outcome_models_once(examples[:60], examples[60:]) is once


def test_fit_workers_is_at_least_one_and_capped():
    assert 1 <= fit_workers() <= MAX_WORKERS


@pytest.mark.parametrize("spec", ["trees:2", "linear:10"])
@pytest.mark.parametrize("kind", ["gain", "valid"])
def test_the_exported_state_scores_as_scikit_learn_does(outcome_fit, profile_free_dataset, spec, kind):
    data = usable_data(records_of(profile_free_dataset, "train"))
    y = np.nan_to_num(data.gain_share) if kind == "gain" else data.valid
    fitted = _Candidate(spec, kind, OutcomeFitSettings(), 0).fit(data.rows, y)
    scorer = Scorer(fitted.state(data.rows), len(ROW_NAMES), kind)
    exported = scorer.predict(data.rows)
    assert np.allclose(np.maximum(exported, 0) if kind == "gain" else exported, fitted.predict(data.rows),
                       rtol=1e-9, atol=1e-12)


def test_propensities_are_probabilities_of_the_logged_families(outcome_fit, profile_free_dataset):
    data = training_data([attempt_of(r) for r in records_of(profile_free_dataset, "dev")])
    p = outcome_fit.propensity.probabilities(data.policy_rows)
    assert np.allclose(p.sum(axis=1), 1.0) and p.min() >= 0
    # better than chance at telling which family the deployed planner tried
    assert np.mean(np.log(p[np.arange(data.n), data.family])) > np.log(1 / 3)


def test_too_few_attempts_says_how_many_are_needed():
    with pytest.raises(OutcomeFitError, match=f"at least {MIN_ATTEMPTS} attempts") as caught:
        fit_outcome_models(episodes(2, 5))
    assert "10 usable logged attempt(s)" in str(caught.value) and "\n" not in str(caught.value)


def test_all_invalid_and_cycles_null_everywhere_are_refused_with_a_line():
    with pytest.raises(OutcomeFitError, match="are invalid"):
        fit_outcome_models(episodes(valid=False))
    with pytest.raises(OutcomeFitError, match="cycles null"):
        fit_outcome_models(episodes(cycles=False))


def test_attempts_without_a_family_are_skipped_and_counted():
    records = episodes() + [record("old", 1, [], entry(1, None, cycles=900, best_before=1000))]
    fit = fit_outcome_models(records)
    assert fit.chosen["skipped"] == {"no family in strategy_tags[0]": 1}


def test_one_family_only_leaves_the_others_unsupported():
    fit = fit_outcome_models(episodes(families=(SCHEDULE,)))
    assert fit.outcome.families == [SCHEDULE]
    estimates = fit.outcome.estimates(episodes(1, 3)[-1].packet)
    assert estimates[LOADS] is None and estimates[DEPS] is None and estimates[SCHEDULE].cycles > 0
    p = fit.propensity.probabilities(np.zeros((1, len(fit.propensity.mean))))
    assert p[0].tolist() == [1.0, 0.0, 0.0]


def test_kernels_of_very_different_scale_share_one_model():
    mixed = episodes(4, 12, scale=1) + [r.model_copy(update={"episode_id": r.episode_id + "-big"})
                                        for r in episodes(4, 12, scale=50)]
    model: OutcomeModel = fit_outcome_models(mixed).outcome
    small, big = episodes(1, 6, scale=1)[-1], episodes(1, 6, scale=50)[-1]
    for family in FAMILIES:
        a, b = model.estimates(small.packet)[family], model.estimates(big.packet)[family]
        assert b.gain_share == pytest.approx(a.gain_share) and b.cycles == pytest.approx(50 * a.cycles)


class _Terminal:
    """A stderr that says it is a terminal (tqdm then draws its bars) and keeps what is written to it."""

    def __init__(self) -> None:
        self.text = ""

    def write(self, text: str) -> int:
        self.text += text
        return len(text)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return True


def test_the_fits_bar_shows_on_a_terminal_unless_the_command_said_no_progress(monkeypatch):
    from evals.progress import quiet_bars

    shown, hidden = _Terminal(), _Terminal()
    monkeypatch.setattr("sys.stderr", shown)
    fit_outcome_models(episodes())
    monkeypatch.setattr("sys.stderr", hidden)
    with quiet_bars():  # what `--no-progress` sets around a command (guidebench.cli)
        fit_outcome_models(episodes())
    assert "fit: gain candidates" in shown.text
    assert hidden.text == ""
