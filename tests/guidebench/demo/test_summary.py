"""guidebench.demo.summary: the board rows the demo prints carry n, the test and the verdict."""

from __future__ import annotations

import pytest

from guidebench import demo


def test_board_summary_prints_n_test_and_verdict_next_to_the_numbers():
    from evals.paired import paired_mean_difference
    from evals.stats import bootstrap_mean
    from guidebench.leaderboard.models import Comparison

    champion = [1.0, 0.0, 0.5]

    def row(rank: int, name: str, values: list[float], lm_share: float) -> dict:
        paired = paired_mean_difference(values, champion, n_resamples=200)
        cost = {"per_decisions": 1000, "lm_decisions": 1000 * lm_share, "lm_calls": 1000 * lm_share,
                "total_tokens": 150_000 * lm_share, "seconds": 900 * lm_share}
        return {"rank": rank, "name": name, "champion": values is champion, "cost": cost,
                "metrics": {"objective": bootstrap_mean(values, n_resamples=200).to_dict(),
                            "lm_share": bootstrap_mean([lm_share] * 3, n_resamples=200).to_dict()},
                # the fields a board's comparison carries (the board builds it from the paired result)
                "comparison": {"against": "logged", "metric": "objective",
                               **{k: v for k, v in paired.to_dict().items() if k in Comparison.model_fields}}}

    rows = demo.board_rows({"rows": [row(1, "candidate", [1.0, 1.0, 1.0], 1 / 3), row(2, "logged", champion, 0.0)]})
    header, candidate, logged = demo.format_rows(rows)
    assert " n " in header and "test vs champion" in header and "verdict" in header
    assert "LM share" in header and "LM calls/1k" in header and "tokens/1k" in header and "s/1k" in header
    assert rows[0]["lm_share"] == pytest.approx(1 / 3) and rows[0]["lm_calls_per_1k"] == pytest.approx(1000 / 3)
    assert candidate.endswith("    0.33         333     50,000     300") and logged.endswith("0.00           0          0       0")
    assert demo.quality_and_cost(rows[0]) == ("candidate: objective 1.000 [1.000, 1.000] on 3 test records; 0.33 of its "
                                              "decisions sent to the LM; per 1,000 decisions 333 LM calls, 50,000 "
                                              "tokens, 300 s")
    assert rows[0]["n_compared"] == 3 and rows[0]["test"] == "exact permutation test"
    assert rows[0]["test_detail"] == "exact permutation test (8 assignments)"
    assert rows[0]["verdict"].startswith("cannot tell apart (p = ") and rows[0]["verdict"].endswith("n = 3)")
    assert " 3  exact permutation test " in candidate and rows[0]["verdict"] in candidate
    assert rows[1]["verdict"] == "champion" and "champion" in logged
