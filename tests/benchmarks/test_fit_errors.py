"""benchmarks.fit_errors: every held-out decision of the fit lands in one group, costed by the cost matrix."""

from __future__ import annotations

from benchmarks import fit_errors
from evals.metrics_fullauto import COST
from optimizer_support import decision_examples


def test_the_groups_cover_every_held_out_turn_and_cost_what_the_matrix_says(tmp_path):
    train, dev = decision_examples(16), decision_examples(8, offset=100)
    rows, chosen = fit_errors.error_groups(train, dev)
    assert sum(row["n"] for row in rows) == chosen["n_scored"] == len(train) + len(dev)
    for row in rows:
        assert row["cost"] == row["n"] * COST[row["label"]][row["answer"]]
    report = tmp_path / "report.md"
    report.write_text("# Optimizers\n", encoding="utf-8")
    text = fit_errors.render(rows, chosen, "python -m benchmarks.fit_errors")
    fit_errors.write_section(text, report, "fit-errors")
    page = report.read_text(encoding="utf-8")
    assert "<!-- fit-errors -->" in page and f"n = {len(train) + len(dev)}" in page
