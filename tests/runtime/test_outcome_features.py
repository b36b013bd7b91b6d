"""What an outcome model reads from a packet: scale-free numbers from the packet alone."""

from __future__ import annotations

import numpy as np

from planner_logs_support import entry, record
from runtime.advisor import FAMILIES
from runtime.outcome_features import (CONTEXT_NAMES, FAMILY_NAMES, ROW_NAMES, candidate_row, packet_features,
                                      policy_row)

SCHEDULE, LOADS, DEPS = FAMILIES


def history(scale: int) -> list[dict]:
    """Five attempts from a best of 1,000 * scale: two schedule wins, an invalid loads attempt, a deps tie."""
    best = 1000 * scale
    lines = [entry(1, SCHEDULE, cycles=950 * scale, best_before=best),
             entry(2, SCHEDULE, cycles=930 * scale, best_before=950 * scale),
             entry(3, LOADS, valid=False, best_before=930 * scale),
             entry(4, DEPS, cycles=930 * scale, best_before=930 * scale),
             entry(5, DEPS, cycles=940 * scale, best_before=930 * scale)]
    return lines


def features_at(scale: int):
    lines = history(scale)
    return packet_features(record("e", 6, lines, entry(6, SCHEDULE, best_before=930 * scale)).packet)


def test_features_are_scale_free():
    small, large = features_at(1), features_at(73)
    assert np.allclose(small.context, large.context) and np.allclose(small.families, large.families)
    assert large.best == 73 * small.best


def test_what_the_tail_shows_per_family():
    f = features_at(1)
    row = dict(zip(FAMILY_NAMES, f.families[FAMILIES.index(SCHEDULE)]))
    assert row["tries"] == 2 and row["wins"] == 2 and row["since_tried"] == 3
    assert row["last_valid_gain"] == 20 / 930
    deps = dict(zip(FAMILY_NAMES, f.families[FAMILIES.index(DEPS)]))
    assert deps["is_current"] == 1 and deps["is_blocked"] == 1 and deps["valid_no_gain"] == 2
    loads = dict(zip(FAMILY_NAMES, f.families[FAMILIES.index(LOADS)]))
    assert loads["has_valid"] == 0 and loads["valid_share"] == 1 / 3
    context = dict(zip(CONTEXT_NAMES, f.context))
    assert context["tail_holds_start"] == 1 and np.isclose(context["log_progress_tail"], np.log(1000 / 930))
    assert context["any_blocked"] == 1 and context["since_improvement"] == 3


def test_the_first_packet_of_an_episode_has_finite_features():
    f = packet_features(record("e", 1, [], entry(1, SCHEDULE, best_before=1500)).packet)
    assert np.all(np.isfinite(f.context)) and np.all(np.isfinite(f.families))
    assert dict(zip(CONTEXT_NAMES, f.context))["tail_holds_start"] == 1


def test_rows_of_different_families_differ_only_in_whose_features_come_first():
    f = features_at(1)
    rows = {family: candidate_row(f, family) for family in FAMILIES}
    assert all(len(row) == len(ROW_NAMES) for row in rows.values())
    context = slice(0, len(CONTEXT_NAMES))
    assert all(np.array_equal(rows[SCHEDULE][context], row[context]) for row in rows.values())
    own = ROW_NAMES.index(f"own:{FAMILY_NAMES[0]}")
    assert [row[own] for row in rows.values()] == list(f.families[:, 0])
    assert len(policy_row(f)) == len(CONTEXT_NAMES) + len(FAMILIES) * len(FAMILY_NAMES)


def test_measured_cycles_count_even_when_the_attempt_was_not_merged():
    """An invalid attempt whose cycles were measured shows what its change did: a drop the family can still bring."""
    lines = [entry(1, LOADS, valid=False, cycles=900, best_before=1000),
             entry(2, LOADS, cycles=1010, best_before=1000),
             entry(3, SCHEDULE, valid=False, best_before=1000)]
    f = packet_features(record("e", 4, lines, entry(4, DEPS, best_before=1000)).packet)
    loads = dict(zip(FAMILY_NAMES, f.families[FAMILIES.index(LOADS)]))
    assert loads["last_change"] == 0.01 and loads["max_drop"] == 0.1 and loads["unmerged_drop"] == 0.1
    assert loads["since_measured"] == 1 and loads["wins"] == 0
    schedule = dict(zip(FAMILY_NAMES, f.families[FAMILIES.index(SCHEDULE)]))
    assert schedule["last_change"] == 0 and schedule["max_drop"] == 0 and schedule["since_measured"] == 21


def test_what_other_families_won_since_a_family_was_last_tried():
    f = features_at(1)  # schedule won at 1 and 2 (50 then 20 of 930), then loads at 3 and deps at 4, 5
    row = dict(zip(ROW_NAMES, candidate_row(f, LOADS)))
    assert row["other1:gain_since_own"] == 0 and row["other2:gain_since_own"] == 0  # nothing won since 3
    deps_tried_last = dict(zip(ROW_NAMES, candidate_row(f, DEPS)))
    assert deps_tried_last["other1:gain_since_own"] == 0
    never = packet_features(record("e", 3, history(1)[:2], entry(3, LOADS, best_before=930)).packet)
    loads = dict(zip(ROW_NAMES, candidate_row(never, LOADS)))
    assert np.isclose(loads["other1:gain_since_own"], 70 / 930)  # schedule's two wins, the whole tail


def _profiled(scale: int, profile: dict | None):
    from runtime.advisor import PerformanceProfile

    packet = features_at_packet(scale)
    return packet.model_copy(update={"performance_profile": None if profile is None
                                     else PerformanceProfile.model_validate(profile)})


def features_at_packet(scale: int):
    return record("e", 6, history(scale), entry(6, SCHEDULE, best_before=930 * scale)).packet


def bounds(scale: int, load: int = 800, cp: int = 700, estimate: int = 930) -> dict:
    """A profile where the load bound binds at `load` (of 930 cycles) and the critical path is `cp`."""
    return {"min_cycles_by_engine": {"load": load * scale, "valu": 500 * scale, "alu": 300 * scale},
            "resource_lb_cycles": load * scale, "cp_lb_cycles": cp * scale, "tight_lb_cycles": max(load, cp) * scale,
            "schedule_cycles_estimate": estimate * scale, "task_counts_by_engine": {"load": 2 * load * scale}}


def test_profile_features_are_scale_free_and_say_which_bound_binds_by_how_much():
    from runtime.outcome_features import PROFILE_NAMES

    small, large = (packet_features(_profiled(s, bounds(s))) for s in (1, 57))
    assert np.allclose(small.context, large.context)
    values = dict(zip(CONTEXT_NAMES, small.context))
    assert values["has_profile"] == 1.0 and values["load_binds"] == 1.0 and values["dominant_load"] == 1.0
    assert np.isclose(values["bind_margin"], (800 - 700) / 800) and np.isclose(values["tight_gap"], np.log(930 / 800))
    assert np.isclose(values["slack_share"], (930 - 800) / 930) and np.isclose(values["dominant_lead"], 300 / 800)
    flipped = dict(zip(CONTEXT_NAMES, packet_features(_profiled(1, bounds(1, load=600, cp=850))).context))
    assert flipped["cp_binds"] == 1.0 and flipped["bind_margin"] < 0 and flipped["dominant_load"] == 1.0
    assert set(PROFILE_NAMES) <= set(CONTEXT_NAMES) and set(PROFILE_NAMES) <= set(ROW_NAMES)


def test_a_packet_without_a_usable_profile_has_the_profile_features_at_zero():
    from runtime.outcome_features import PROFILE_NAMES, profile_usable

    bare = packet_features(_profiled(1, None))
    for broken in ({**bounds(1), "tight_lb_cycles": 0}, {k: v for k, v in bounds(1).items() if k != "cp_lb_cycles"},
                   {**bounds(1), "min_cycles_by_engine": {}}):
        packet = _profiled(1, broken)
        assert not profile_usable(packet.performance_profile)
        assert np.allclose(packet_features(packet).context, bare.context)
    values = dict(zip(CONTEXT_NAMES, bare.context))
    assert values["has_profile"] == 0.0 and all(values[name] == 0.0 for name in PROFILE_NAMES)


def test_each_familys_room_is_what_the_profile_leaves_it():
    from runtime.outcome_features import family_rooms

    rooms = family_rooms(_profiled(3, bounds(3)))  # load 800 binds over cp 700, estimate 930, best 930
    assert np.isclose(rooms[SCHEDULE], 130 / 930) and np.isclose(rooms[LOADS], 100 / 930) and rooms[DEPS] == 0.0
    row = dict(zip(FAMILY_NAMES, packet_features(_profiled(3, bounds(3))).families[FAMILIES.index(LOADS)]))
    assert np.isclose(row["room"], 100 / 930)
    assert family_rooms(_profiled(1, None)) == {f: 0.0 for f in FAMILIES}


def test_fewer_loads_have_no_room_when_another_engine_binds():
    from runtime.outcome_features import family_rooms

    valu_binds = {**bounds(1), "min_cycles_by_engine": {"load": 800, "valu": 850, "alu": 300},
                  "resource_lb_cycles": 850, "tight_lb_cycles": 850}
    rooms = family_rooms(_profiled(1, valu_binds))
    assert rooms[LOADS] == 0.0 and rooms[DEPS] == 0.0 and np.isclose(rooms[SCHEDULE], 80 / 930)
