"""runtime.exploration: the stated probabilities, their floor, blocked families, the seeded draw, bad settings."""

from __future__ import annotations

import math

import pytest
from pydantic import ValidationError

from runtime.advisor import FAMILIES
from runtime.exploration import (ExplorationSettings, check_probabilities, default_settings, draw, draw_fraction,
                                 probabilities)

S, L, B = FAMILIES


def test_greedy_states_probability_one_for_its_family():
    assert probabilities(ExplorationSettings(), [S, L, B], L) == {S: 0.0, L: 1.0, B: 0.0}


def test_epsilon_spreads_over_the_open_families_and_never_over_a_blocked_one():
    probs = probabilities(ExplorationSettings(policy="epsilon", epsilon=0.3), [S, L], S)
    assert probs[B] == 0.0
    assert math.isclose(probs[S], 0.85) and math.isclose(probs[L], 0.15)
    assert check_probabilities(probs) is None


def test_the_floor_lifts_every_open_family_and_keeps_the_sum():
    probs = probabilities(ExplorationSettings(policy="epsilon", epsilon=0.03, floor=0.1), [S, L, B], B)
    assert min(probs.values()) == pytest.approx(0.1) and sum(probs.values()) == pytest.approx(1.0)
    assert probs[B] == max(probs.values())


def test_softmax_follows_the_estimates_at_the_temperature():
    settings = ExplorationSettings(policy="softmax", temperature=0.5)
    probs = probabilities(settings, [S, L, B], S, {S: 1.0, L: 0.5, B: None})
    assert probs[B] == 0.0  # no estimate and no epsilon: never drawn
    assert probs[L] / probs[S] == pytest.approx(math.exp(-1.0))
    colder = probabilities(ExplorationSettings(policy="softmax", temperature=0.1), [S, L, B], S, {S: 1.0, L: 0.5})
    assert colder[L] < probs[L]


def test_the_draw_is_seeded_and_follows_the_probabilities():
    probs = {S: 0.2, L: 0.0, B: 0.8}
    assert draw_fraction(3, "ab" * 32) == draw_fraction(3, "ab" * 32) != draw_fraction(4, "ab" * 32)
    assert draw(probs, 0.1) == S and draw(probs, 0.2) == B and draw(probs, 0.999) == B
    drawn = [draw(probs, draw_fraction(0, f"{i:064x}")) for i in range(4000)]
    assert L not in drawn and abs(drawn.count(S) / 4000 - 0.2) < 0.03


@pytest.mark.parametrize("bad", [dict(policy="epsilon", epsilon=1.5), dict(policy="epsilon", epsilon=-0.1),
                                 dict(policy="softmax", temperature=0.0), dict(policy="epsilon", floor=0.5),
                                 dict(policy="epsilon", epsilon=math.nan), dict(policy="greedy", epsilon=0.1),
                                 dict(policy="sometimes"), dict(policy="epsilon", seed=-1),
                                 dict(policy="epsilon", surprise=1)])
def test_settings_out_of_range_are_refused(bad):
    with pytest.raises(ValidationError):
        ExplorationSettings.model_validate(bad)


def test_the_defaults_are_in_range_and_explore():
    assert default_settings("epsilon").text() == "epsilon-greedy, epsilon 0.2, floor 0.05, seed 0"
    assert default_settings("softmax").explores and not default_settings("greedy").explores


@pytest.mark.parametrize("probs, why", [({S: 0.5, L: 0.5}, "exactly the families"),
                                        ({S: math.nan, L: 0.5, B: 0.5}, "not a finite number"),
                                        ({S: -0.1, L: 0.6, B: 0.5}, "negative"),
                                        ({S: 0.3, L: 0.3, B: 0.3}, "sum to 0.9")])
def test_a_stated_distribution_that_is_not_one_is_named(probs, why):
    assert why in check_probabilities(probs)
