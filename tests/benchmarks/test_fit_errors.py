"""benchmarks.fit_errors: the post-mortem of the fit's held-out decisions covers every held-out turn, and
pairs it with what `logged` dispatched on the same turns."""

from __future__ import annotations

import programs
from benchmarks import fit_errors
from optimizer_support import decision_records
from runtime import LoggedDecision


def _with_logged(records):
    """The records with a deployed decision that always continued (what `logged` replays)."""
    logged = LoggedDecision(action="continue", confidence=0.9, model_action="continue", model_confidence=0.9)
    return [r.model_copy(update={"logged": logged}) for r in records]


def test_the_postmortem_covers_every_held_out_turn_and_pairs_it_with_logged(tmp_path):
    train, dev = _with_logged(decision_records(16)), _with_logged(decision_records(8, offset=100))
    records = {r.record_id: r for r in train + dev}
    pm, against, chosen = fit_errors.analyse([programs.decision_example(r) for r in train],
                                             [programs.decision_example(r) for r in dev], records, n_resamples=100)
    assert pm.n_records == chosen["n_scored"] == len(records)
    assert sum(s.n for s in pm.slices if s.slice == "label") == len(records)
    assert against.champion == "logged" and against.overall.n == len(records)
    # always continuing is wrong on every turn whose label is not continue: the model is ahead there
    assert against.overall.diff > 0
    report = tmp_path / "report.md"
    report.write_text("# Optimizers\n", encoding="utf-8")
    text = fit_errors.render(pm, against, chosen, "python -m benchmarks.fit_errors")
    fit_errors.write_section(text, report, "fit-errors")
    page = report.read_text(encoding="utf-8")
    assert "<!-- fit-errors -->" in page and f"n = {len(records)}" in page
    assert "#### full_auto.learned (out of fold) vs logged, by slice" in page
