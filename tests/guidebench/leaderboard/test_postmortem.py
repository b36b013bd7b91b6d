"""guidebench.leaderboard.postmortem: a board carries every row's post-mortem and each challenger's slices
against the champion, in leaderboard.json, .md and .html."""

from __future__ import annotations

from html.parser import HTMLParser

import pytest

from guidebench.leaderboard.board import run_leaderboard
from guidebench.leaderboard.models import Leaderboard
from guidebench.leaderboard.packages import from_registry
from guidebench.leaderboard.render import HTML_FILE, JSON_FILE, MARKDOWN_FILE, write_reports

from leaderboard_support import make_dataset, register_test_programs


@pytest.fixture(scope="module")
def board_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("board-pm")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("GUIDEBENCH_HOME", str(root / "home"))
        register_test_programs()
        data = make_dataset(root / "data", n=60, seed=9)
        board, _ = run_leaderboard(from_registry(["logged", "rule", "test.oracle"]), data, "test", champion="logged",
                                   n_resamples=100)
        write_reports(board, root / "board")
    return root / "board"


class _Section(HTMLParser):
    """The ids of the post-mortem's headings and tables, and the rows of each table."""

    def __init__(self) -> None:
        super().__init__()
        self.ids: list[str] = []
        self.rows: dict[str, int] = {}
        self._table = None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if attrs.get("id", "").startswith("postmortem"):
            self.ids.append(attrs["id"])
        if tag == "table":
            self._table = attrs.get("id")
        elif tag == "tr" and self._table:
            self.rows[self._table] = self.rows.get(self._table, 0) + 1


def test_the_board_json_holds_every_rows_postmortem_and_each_challengers_slices(board_dir):
    board = Leaderboard.model_validate_json((board_dir / JSON_FILE).read_text())
    pm = board.postmortem
    assert list(pm.rows) == [row.name for row in board.rows]
    assert [c.challenger for c in pm.challengers] == [row.name for row in board.rows if not row.champion]
    for comparison in pm.challengers:
        row = board.row(comparison.challenger)
        assert comparison.champion == "logged" and comparison.n_records == board.n_records
        assert comparison.overall.diff == pytest.approx(row.comparison.diff)  # the ranking's own paired difference
        assert {d.slice for d in comparison.slices} >= {"label", "pending", "turn_band"}


def test_markdown_and_html_show_the_section(board_dir):
    board = Leaderboard.model_validate_json((board_dir / JSON_FILE).read_text())
    markdown = (board_dir / MARKDOWN_FILE).read_text()
    assert "## Post-mortem" in markdown and "### Slices below the rest, per row" in markdown
    page = _Section()
    page.feed((board_dir / HTML_FILE).read_text())
    assert page.ids[0] == "postmortem"
    for index, comparison in enumerate(board.postmortem.challengers):
        assert f"### {comparison.challenger} vs logged, by slice" in markdown
        assert page.rows[f"postmortem-slices-{index}"] == len(comparison.slices) + 1  # header + one per value


def test_a_row_that_learned_from_the_boards_records_is_in_sample_everywhere(fitted, tmp_path):
    """The fit's own dev results on a dev board: learned from every record, so its post-mortem is in-sample in
    leaderboard.json, .md and .html, and its comparison with the champion draws no win or loss."""
    board, _ = run_leaderboard(from_registry(["logged"]), fitted["ds"], "dev", n_resamples=100,
                               results=[fitted["fit"] / "dev"])
    write_reports(board, tmp_path / "board")
    fit = next(row for row in board.rows if not row.champion)
    assert board.champion == "logged" and fit.verdict() == f"learned from {fit.n} of {fit.n}: no evidence"
    pm = board.postmortem
    (against,) = pm.challengers
    assert pm.rows[fit.name].in_sample == fit.learned_from.line() and not pm.rows["logged"].in_sample
    assert against.in_sample == f"{fit.name}: {fit.learned_from.line()}"
    assert against.verdicts("wins") == against.verdicts("loses") == []
    assert {d.verdict for d in against.slices if d.comparison} == {"in-sample"}
    markdown = (tmp_path / "board" / MARKDOWN_FILE).read_text()
    section = markdown.split("## Post-mortem", 1)[1]
    banner = f"{fit.name}: In-sample, not evidence: {fit.learned_from.line()}."
    assert f"> **{banner}" in section and "wins (q ≤" not in section and "loses (q ≤" not in section
    assert "- no wins or losses: In-sample, not evidence: " in section
    html_text = (tmp_path / "board" / HTML_FILE).read_text()
    html_section = html_text.split('id="postmortem"', 1)[1]
    assert "In-sample, not evidence" in html_section and "wins (q ≤" not in html_section
