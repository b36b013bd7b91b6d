"""The post-mortem finds a planted slice of broken decisions, alone and against a champion, and finds nothing
when there is nothing to find: identical programs, two programs erring at random at the same rate."""

from __future__ import annotations

import hashlib
import math
from typing import Any

import dspy
import numpy as np
import pytest

import programs
from evals.postmortem import POOLED, compare_slices, post_mortem
from evals.replay import replay
from evals.slice_tests import FDR, below_rest_p, benjamini_hochberg
from evals.slices import INVALID, MISSING, slice_values
from runtime import FullAutoTurnSummary, GuardrailConfig, GuidanceDecision

from leaderboard_support import make_records, right_action

N_RECORDS = 120


def _summary(inputs: dict[str, Any]) -> FullAutoTurnSummary:
    return FullAutoTurnSummary.model_validate({k: inputs[k] for k in FullAutoTurnSummary.model_fields if k in inputs},
                                              strict=False)


class Planted(dspy.Module):
    """The toy world's rule, except on turns with a pending approval (which must pause): there it continues.
    With `error_rate`, it also answers a wrong action on that share of turns, chosen by a hash of the turn."""

    kind = "full_auto"

    def __init__(self, broken: bool = True, error_rate: float = 0.0, salt: str = ""):
        super().__init__()
        self.broken, self.error_rate, self.salt = broken, error_rate, salt

    def forward(self, **inputs: Any) -> dspy.Prediction:
        summary = _summary(inputs)
        action = right_action(summary, GuardrailConfig())
        if self.broken and summary.pending_approvals not in ("", "0"):
            action = "continue"
        draw = int(hashlib.sha256(f"{self.salt}{summary.turn_id}".encode()).hexdigest()[:8], 16) / 16 ** 8
        if draw < self.error_rate:
            action = {"continue": "stop", "pause": "continue", "stop": "continue"}[action]
        return programs.decision_prediction(GuidanceDecision(
            action=action, confidence=0.9, reason="test", next_input="go on" if action == "continue" else ""))


@pytest.fixture(scope="module")
def records():
    return make_records(N_RECORDS, seed=11)


@pytest.fixture(scope="module")
def replays(records):
    """Rows of: the oracle, the oracle twice, the planted program, two noisy programs of the same error rate."""
    programs_ = {"oracle": Planted(broken=False), "oracle_again": Planted(broken=False), "planted": Planted(),
                 "noisy_a": Planted(broken=False, error_rate=0.2, salt="a"),
                 "noisy_b": Planted(broken=False, error_rate=0.2, salt="b")}
    return {name: replay(program, records, progress=False, n_resamples=200, name=name).rows
            for name, program in programs_.items()}


def _planted_ids(records) -> set[str]:
    return {r.record_id for r in records if r.summary.pending_approvals not in ("", "0")}


def test_the_planted_slice_scores_below_the_rest(records, replays):
    pm = post_mortem("full_auto", replays["planted"], program="planted", n_resamples=200)
    found = {(s.family, s.slice, s.value) for s in pm.outliers()}
    assert ("slice", "pending", "approvals") in found
    planted = _planted_ids(records)
    rows = replays["planted"]
    for stat in pm.outliers():  # everything it names holds broken decisions
        values = [row["slices"] for row in rows]
        if stat.family == "group":
            members = {row["record_id"] for row in rows if row["group_id"] == stat.value}
        else:
            pairs = zip(stat.slice.split(" & "), stat.value.split(" & "))
            members = {row["record_id"] for row, v in zip(rows, values) if all(v[k] == x for k, x in pairs)} \
                if " & " in stat.slice else {row["record_id"] for row, v in zip(rows, values) if v[stat.slice] == stat.value}
        assert members & planted, stat
    approvals = next(s for s in pm.slices if (s.slice, s.value) == ("pending", "approvals"))
    assert approvals.q_value <= pm.fdr and approvals.diff_vs_rest < 0
    assert approvals.metrics["objective"].ci_high < pm.overall.value
    assert approvals.n == len(planted)


def test_the_planted_slice_is_where_the_challenger_loses(replays):
    result = compare_slices(replays["planted"], replays["oracle"], "full_auto", challenger="planted",
                            champion="oracle", n_resamples=200)
    losses = {(d.slice, d.value) for d in result.verdicts("loses")}
    assert ("pending", "approvals") in losses
    assert result.verdicts("wins") == []
    untouched = next(d for d in result.slices if (d.slice, d.value) == ("pending", "none"))
    assert untouched.comparison.diff == 0 and untouched.verdict == "cannot tell"
    loss = next(d for d in result.slices if (d.slice, d.value) == ("pending", "approvals"))
    assert loss.comparison.ci_high < 0 and loss.q_value <= FDR


def test_identical_programs_differ_nowhere(replays):
    result = compare_slices(replays["oracle_again"], replays["oracle"], "full_auto", n_resamples=200)
    assert result.verdicts("wins") == result.verdicts("loses") == []
    assert all(d.comparison.diff == 0 and d.comparison.p_value == 1.0 for d in result.slices if d.comparison)


def test_two_programs_erring_at_random_at_the_same_rate_find_nothing(replays):
    result = compare_slices(replays["noisy_a"], replays["noisy_b"], "full_auto", n_resamples=200)
    assert result.verdicts("wins") == result.verdicts("loses") == []
    assert any(d.comparison.diff != 0 for d in result.slices if d.comparison)  # they do differ, by chance
    assert result.overall.diff != 0 and result.overall.p_value > FDR


def _discovery_rate(masks: np.ndarray, reps: int, planted: float, seed: int) -> float:
    """Share of replicates in which Benjamini-Hochberg names any slice; scores drawn independently of the
    slices, except that `planted` of the first slice's records score 0."""
    rng = np.random.default_rng(seed)
    found = 0
    for rep in range(reps):
        scores = rng.choice([0.0, 0.4, 0.6, 0.8, 1.0], size=masks.shape[0], p=[0.05, 0.05, 0.1, 0.1, 0.7])
        scores = np.where(masks[:, 0] & (rng.random(masks.shape[0]) < planted), 0.0, scores)
        q = benjamini_hochberg(list(below_rest_p(scores, masks, seed=rep, permutations=999)))
        found += any(value is not None and value <= FDR for value in q)
    return found / reps


def test_the_slice_tests_hold_their_false_discovery_rate_under_the_null(records):
    """With scores independent of the records' real slices, a slice is named in at most about FDR of the
    replicates (under the global null Benjamini-Hochberg bounds the chance of any discovery by the FDR);
    the same tests do find a slice whose records lose a third of their scores."""
    values = [slice_values(r, "full_auto") for r in records]
    masks = np.stack([[v[name] == value for v in values] for name in values[0]
                      for value in sorted({v[name] for v in values})], axis=1)
    masks = masks[:, (masks.sum(axis=0) >= 8) & (masks.sum(axis=0) <= len(records) - 8)]
    assert masks.shape[1] >= 10
    reps = 120
    assert _discovery_rate(masks, reps, 0.0, seed=5) <= FDR + 3 * math.sqrt(FDR * (1 - FDR) / reps)
    assert _discovery_rate(masks, 30, 0.35, seed=6) >= 0.5


def test_a_split_where_every_slice_value_is_small_is_pooled_not_hidden(replays):
    rows = replays["planted"][:6]
    pm = post_mortem("full_auto", rows, min_n=8, n_resamples=200)
    assert {s.value for s in pm.slices} == {POOLED}
    assert all(s.n == 6 and s.untested for s in pm.slices)
    assert all(s.metrics["objective"].n == 6 for s in pm.slices)  # still measured, with an interval
    assert pm.outliers() == [] and any("nothing was tested" in note for note in pm.notes)
    result = compare_slices(rows, replays["oracle"][:6], "full_auto", min_n=8, n_resamples=200)
    assert all(d.verdict == "untested" for d in result.slices) and result.overall.n == 6


def test_missing_and_wrong_typed_slice_fields_are_their_own_pooled_values(replays):
    rows = [dict(row, slices=dict(row["slices"])) for row in replays["planted"]]
    for row in rows[:5]:
        del row["slices"]["turn_band"]
    for row in rows[5:8]:
        row["slices"]["turn_band"] = 7  # a number where a band label belongs
    pm = post_mortem("full_auto", rows, n_resamples=200)
    pooled = next(s for s in pm.slices if s.slice == "turn_band" and s.value == POOLED)
    assert {MISSING, INVALID} <= set(pooled.pooled) and pooled.n >= 8
    assert sum(s.n for s in pm.slices if s.slice == "turn_band") == len(rows)


def test_rows_of_an_older_eval_name_the_slices_they_lack(replays):
    rows = [{k: v for k, v in row.items() if k != "slices"} for row in replays["planted"][:40]]
    pm = post_mortem("full_auto", rows, n_resamples=200)
    assert pm.missing_slices == ["label_reason", "last_turn_status", "guardrail_rule", "pending", "turn_band",
                                 "no_progress", "run_config"]
    assert {s.slice for s in pm.slices} == {"label", "label_source"}
    result = compare_slices(rows, replays["oracle"][:40], "full_auto", n_resamples=200)
    assert result.missing_slices == []  # the champion's rows carry them


def test_cost_outliers_lie_beyond_the_fence(replays):
    rows = [dict(row, usage=dict(row["usage"])) for row in replays["oracle"]]
    for index, row in enumerate(rows):
        row["usage"]["total_tokens"] = 1000 + index % 7
    rows[3]["usage"]["total_tokens"] = 50_000
    pm = post_mortem("full_auto", rows, n_resamples=200)
    tokens = next(c for c in pm.cost if c.measure == "tokens")
    assert tokens.n_outliers == 1 and tokens.records[0]["record_id"] == rows[3]["record_id"]
    assert tokens.fence == tokens.q3 + 3 * tokens.iqr


def test_challengers_must_share_the_champions_records(replays):
    with pytest.raises(ValueError, match="same records"):
        compare_slices(replays["planted"][:10], replays["oracle"], "full_auto")


def test_in_sample_records_draw_no_win_or_loss(replays):
    why = "40 of the 40 records of split dev of dataset aaaaaaaaaaaa are records the program learned from"
    result = compare_slices(replays["planted"], replays["oracle"], "full_auto", challenger="planted",
                            champion="oracle", n_resamples=200, in_sample=why)
    assert result.in_sample == why and result.verdicts("wins") == result.verdicts("loses") == []
    assert result.leaning(-1) == result.leaning(1) == []
    tested = [d for d in result.slices if d.comparison is not None]
    assert tested and {d.verdict for d in tested} == {"in-sample"}
    # the numbers are kept; only the verdict is withheld (the same slice loses out of sample)
    loss = next(d for d in tested if (d.slice, d.value) == ("pending", "approvals"))
    assert loss.comparison.ci_high < 0 and loss.q_value <= FDR
    pm = post_mortem("full_auto", replays["planted"], program="planted", n_resamples=200, in_sample=why)
    assert pm.in_sample == why and type(pm).model_validate_json(pm.model_dump_json()).in_sample == why


def test_the_post_mortem_shows_its_draws_with_an_eta_only_when_asked_and_computes_the_same(replays, capsys):
    quiet = post_mortem("full_auto", replays["planted"], program="planted", n_resamples=200)
    assert capsys.readouterr().err == ""
    shown = post_mortem("full_auto", replays["planted"], program="planted", n_resamples=200, progress=True)
    bar = capsys.readouterr().err
    assert "post-mortem" in bar and "draw" in bar and "<" in bar  # tqdm's [elapsed<remaining]: the ETA
    assert shown.model_dump() == quiet.model_dump()


def test_the_comparison_shows_its_slices_only_when_asked_and_computes_the_same(replays, capsys):
    options = {"challenger": "planted", "champion": "oracle", "n_resamples": 200}
    quiet = compare_slices(replays["planted"], replays["oracle"], "full_auto", **options)
    assert capsys.readouterr().err == ""
    shown = compare_slices(replays["planted"], replays["oracle"], "full_auto", progress=True, **options)
    bar = capsys.readouterr().err
    assert "post-mortem against the champion" in bar and "slice" in bar
    assert shown.model_dump() == quiet.model_dump()
