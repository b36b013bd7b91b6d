"""The outcome model's production half: JSON state in, per-family estimates out, NumPy only."""

from __future__ import annotations

import copy

import numpy as np
import pytest

from planner_logs_support import entry, record
from runtime.advisor import FAMILIES
from runtime.outcome import MODEL_KIND, OutcomeModel, OutcomeModelError
from runtime.outcome_features import FEATURES_VERSION, ROW_NAMES, packet_features

SCHEDULE, LOADS, DEPS = FAMILIES
IS_LOADS = ROW_NAMES.index(f"is:{LOADS}")


LEAF = {"feature": [0], "threshold": [0.0], "left": [-1], "right": [-1], "value": [0.0]}  # a constant's one tree


def state(families=FAMILIES) -> dict:
    """A hand-made model: P(valid) 0.8 everywhere; loads takes 2% of the best, anything else 0.5%."""
    gain_tree = {"feature": [IS_LOADS, 0, 0], "threshold": [0.5, 0.0, 0.0], "left": [1, -1, -1],
                 "right": [2, -1, -1], "value": [0.0, 0.005, 0.02]}
    return {"kind": MODEL_KIND, "features_version": FEATURES_VERSION, "row_names": list(ROW_NAMES),
            "families": list(families), "valid": {"type": "trees", "link": "logistic", "bias": float(np.log(4.0)),
                                                  "trees": [LEAF]},
            "gain": {"type": "trees", "link": "identity", "bias": 0.0, "trees": [gain_tree]},
            "family_scale": {family: 1.0 for family in families}, "fit": {}}


def wide(n: int) -> dict:
    """A tree of n nodes: a root and its two leaves, then leaves no path reaches."""
    return {"feature": [0] * n, "threshold": [0.5] * n, "left": [1] + [-1] * (n - 1), "right": [2] + [-1] * (n - 1),
            "value": [0.0] * n}


def chain(n: int) -> dict:
    """A tree of n nodes in one chain: every inner node's left child is a leaf, its right child the next node."""
    left = [i + 1 if i % 2 == 0 and i + 2 < n else -1 for i in range(n)]
    right = [i + 2 if i % 2 == 0 and i + 2 < n else -1 for i in range(n)]
    return {"feature": [0] * n, "threshold": [0.5] * n, "left": left, "right": right, "value": [0.0] * n}


def packet(best=2000):
    return record("e", 2, [entry(1, SCHEDULE, cycles=best, best_before=best + 10)],
                  entry(2, LOADS, best_before=best), best=best).packet


def test_estimates_per_family_in_share_and_cycles():
    model = OutcomeModel(state())
    estimates = model.estimates(packet())
    assert estimates[LOADS].gain_share == pytest.approx(0.02) and estimates[LOADS].cycles == pytest.approx(40.0)
    assert estimates[SCHEDULE].cycles == pytest.approx(10.0) and estimates[SCHEDULE].p_valid == pytest.approx(0.8)
    assert OutcomeModel(model.to_state()).to_state() == model.to_state()


def test_a_family_never_seen_in_train_has_no_estimate_and_no_best_no_cycles():
    model = OutcomeModel(state(families=[SCHEDULE]))
    estimates = model.estimates(packet())
    assert estimates[LOADS] is None and estimates[DEPS] is None and estimates[SCHEDULE] is not None
    features = packet_features(packet())
    unscaled = OutcomeModel(state()).estimates_of(type(features)(features.context, features.families, None))
    assert unscaled[LOADS].cycles is None and unscaled[LOADS].gain_share == pytest.approx(0.02)


@pytest.mark.parametrize("change, message", [
    (lambda s: s.update(kind="linear"), "kind"),
    (lambda s: s.update(features_version=0), "features_version"),
    (lambda s: s.update(families=["family:other"]), "families"),
    (lambda s: s["gain"]["trees"][0].update(left=[5, -1, -1]), "out of range"),
    (lambda s: s["gain"]["trees"][0].update(right=[0, -1, -1]), "out of range"),  # a loop: scoring would never end
    (lambda s: s["gain"]["trees"][0].update(value=[0.0, float("nan"), 0.0]), "finite"),
    (lambda s: s["valid"].update(link="softmax"), "link"),
    (lambda s: s.update(family_scale={**s["family_scale"], LOADS: 0.0}), "family_scale"),
    (lambda s: s.update(family_scale={**s["family_scale"], "family:other": 1.0}), "family_scale"),
    # what could hang the scorer or make it lie, planted
    (lambda s: s["family_scale"].pop(LOADS), f"no factor for {LOADS}: every family"),
    (lambda s: s.pop("family_scale"), "family_scale"),
    (lambda s: s["gain"]["trees"][0].update(value=[0.0, 0.005, 1e308]),
     "add up to 1e\\+308; a scorer of link identity"),
    (lambda s: s["valid"].update(bias=1e308), "add up to 1e\\+308; a scorer of link logistic"),
    (lambda s: s["gain"].update(trees=[]), "non-empty list"),
    (lambda s: s["valid"].update(trees=[]), "non-empty list"),
    (lambda s: s["gain"].update(trees=[chain(200_001)]), "deeper than 32 levels"),
    (lambda s: s["gain"].update(trees=[chain(67)]), "deeper than 32 levels"),
    (lambda s: s["gain"].update(trees=[wide(1_000_001)]), "1000001 nodes"),
    (lambda s: s.update(gain={"type": "linear", "link": "identity", "mean": [0.0], "scale": [1.0], "coef": [1.0],
                              "intercept": 0.0}), "numbers each"),
])
def test_a_bad_state_is_refused_with_one_line(change, message):
    bad = copy.deepcopy(state())
    change(bad)
    with pytest.raises(OutcomeModelError, match=message) as caught:
        OutcomeModel(bad)
    assert "\n" not in str(caught.value)


def test_a_tree_at_the_depth_cap_loads_and_scores():
    model = OutcomeModel({**state(), "gain": {"type": "trees", "link": "identity", "bias": 0.0,
                                              "trees": [chain(65)]}})  # 32 levels: the cap itself
    assert model.estimates(packet())[LOADS].gain_share == 0.0


def test_a_family_scale_multiplies_that_familys_estimate_only():
    scaled = OutcomeModel({**state(), "family_scale": {**state()["family_scale"], LOADS: 0.5}})
    estimates, plain = scaled.estimates(packet()), OutcomeModel(state()).estimates(packet())
    assert estimates[LOADS].gain_share == pytest.approx(0.01) and estimates[LOADS].cycles == pytest.approx(20.0)
    assert estimates[SCHEDULE] == plain[SCHEDULE] and estimates[LOADS].p_valid == plain[LOADS].p_valid
    assert OutcomeModel(scaled.to_state()).to_state() == scaled.to_state()
