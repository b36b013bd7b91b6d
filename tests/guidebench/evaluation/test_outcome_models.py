"""The application's outcome models for a dataset: fit on train + dev once, cached, handed to the scorers."""

from __future__ import annotations

import pytest

from guidebench.errors import GuidebenchError
from guidebench.evaluation.outcome_models import CYCLES_MODELS, cycles_for, models_for
from planner_logs_support import records_of


@pytest.fixture(autouse=True)
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("GUIDEBENCH_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def test_the_models_are_cached_by_dataset_splits_and_settings(profile_free_dataset, outcome_fit, home):
    first = models_for(profile_free_dataset)
    assert not first.from_cache and first.path.parent == home / "outcome-models" and first.path.is_file()
    assert first.outcome.to_state() == outcome_fit.outcome.to_state()  # the fit recipe's fit, served once
    again = models_for(profile_free_dataset)
    assert again.from_cache and again.key == first.key
    assert again.outcome.to_state() == first.outcome.to_state()
    first.path.write_text("{damaged")
    assert not models_for(profile_free_dataset).from_cache  # a damaged entry is fit again


def test_each_choice_names_its_model_and_what_it_rests_on(profile_free_dataset, outcome_fit):
    test = records_of(profile_free_dataset, "test")
    auto = cycles_for("auto", test, profile_free_dataset, split="test")
    assert auto.name == "learned" and "0 of" in auto.notes[0] and auto.models is not None
    sim = cycles_for("sim", test, profile_free_dataset, split="test")
    assert sim.name == "sim" and any("does not apply" in note for note in sim.notes)
    inside = cycles_for("learned", records_of(profile_free_dataset, "dev"), profile_free_dataset, split="dev")
    assert any("in-sample" in note for note in inside.notes)
    with pytest.raises(GuidebenchError, match="--cycles-model"):
        cycles_for("nominal", test, profile_free_dataset, split="test")
    from guidebench.commands import CYCLES_MODEL_CHOICES

    assert CYCLES_MODELS == CYCLES_MODEL_CHOICES == ("auto", "sim", "learned")


def test_logs_no_model_can_learn_from_give_one_story_not_a_traceback(tmp_path):
    """Small old-shape logs (no family in strategy_tags[0]) on the default auto: the fit says why it cannot learn,
    the auto note names no model it does not use, and every record is left out of the objective."""
    import json

    from planner_logs_support import imported
    from guidebench.simulators.experiments import SIDE_FILE_SUFFIX, write_episodes

    logs = tmp_path / "logs"
    write_episodes(logs, 2, 1, old_shape_fraction=1.0)
    for side in logs.rglob(f"*{SIDE_FILE_SUFFIX}"):
        side.unlink()
    dataset = imported(logs, tmp_path / "dataset")
    split = next(name for name, info in json.loads((dataset / "dataset.json").read_text())["splits"].items()
                 if info["n"])
    choice = cycles_for("auto", records_of(dataset, split), dataset, split=split)
    assert choice.name == "none" and choice.models is None
    assert any("usable logged attempt" in note for note in choice.notes)
    auto = next(note for note in choice.notes if note.startswith("cycles model auto"))
    assert "no model estimates the improvement" in auto and "learned outcome model estimates" not in auto
