"""Leaderboard renderings: every board names its test, n and verdict per row; the page in a real browser.

The page is loaded from disk by headless Chromium, with no server.

Chromium comes from Debian's `chromium` package; `tests/setup/ensure_chromium.sh` installs it when
missing (apt-get, as root). The page must show the ranking table and both plots, decoded from their
embedded data URIs; a screenshot is kept with the reports.
"""

from __future__ import annotations

import html
import os
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest

from evals.paired import paired_mean_difference
from evals.stats import bootstrap_mean
from guidebench.commands.leaderboard import ranking_text
from guidebench.leaderboard.board import _comparison, run_leaderboard
from guidebench.leaderboard.models import Cost, Leaderboard, LeaderboardRow
from guidebench.leaderboard.plots import METRICS_PNG, QUALITY_COST_PNG
from guidebench.leaderboard.render import HTML_FILE, render_html, render_markdown, render_text, write_reports
from guidebench.leaderboard.packages import from_registry

from leaderboard_support import make_dataset, register_test_programs

ROOT = Path(__file__).resolve().parents[3]
ENSURE_CHROMIUM = ROOT / "tests" / "setup" / "ensure_chromium.sh"
SAMPLE_BOARD = ROOT / "reports" / "leaderboard" / "fullauto" / HTML_FILE
SAMPLE_SCREENSHOT = ROOT / "reports" / "leaderboard.png"
# Reads back, into the DOM, whether each embedded image decoded: --dump-dom then shows it.
_PROBE = ("<script>window.addEventListener('load',()=>{document.body.setAttribute('data-images',"
          "Array.from(document.images).map(i=>i.complete?i.naturalWidth+'x'+i.naturalHeight:'pending').join(','));"
          "});</script>")


@pytest.fixture(scope="module")
def chromium() -> str:
    done = subprocess.run(["bash", str(ENSURE_CHROMIUM)], capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, f"could not provide chromium:\n{done.stderr[-2000:]}"
    return done.stdout.strip().splitlines()[-1]


def _flags(profile: Path) -> list[str]:
    return ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            f"--user-data-dir={profile}"]


def _run(chromium: str, profile: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([chromium, *_flags(profile), *args], capture_output=True, text=True, timeout=180)


class _Tables(HTMLParser):
    """Rows of `#leaderboard-table` and the attributes of every <img>."""

    def __init__(self) -> None:
        super().__init__()
        self.in_board = False
        self.rows: list[list[str]] = []
        self.images: list[dict[str, str]] = []
        self.body: dict[str, str] = {}
        self._cell: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "table":
            self.in_board = attrs.get("id") == "leaderboard-table"
        elif tag == "tr" and self.in_board:
            self.rows.append([])
        elif tag in ("td", "th") and self.in_board:
            self._cell = []
        elif tag == "img":
            self.images.append(attrs)
        elif tag == "body":
            self.body = attrs

    def handle_endtag(self, tag):
        if tag == "table":
            self.in_board = False
        elif tag in ("td", "th") and self._cell is not None and self.rows:
            self.rows[-1].append("".join(self._cell).strip())
            self._cell = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


def check_page(chromium: str, page: Path, work: Path, screenshot: Path) -> _Tables:
    """Load a board page in Chromium: the table, both decoded plots, and a screenshot."""
    probe = work / "probe.html"
    probe.write_text(page.read_text(encoding="utf-8").replace("</body>", _PROBE + "</body>"), encoding="utf-8")
    dom = _run(chromium, work / "profile", "--virtual-time-budget=5000", "--dump-dom", probe.as_uri())
    assert dom.returncode == 0, dom.stderr[-2000:]
    parsed = _Tables()
    parsed.feed(dom.stdout)
    assert parsed.rows and parsed.rows[0][:3] == ["#", "variant", "objective"]
    plots = [img for img in parsed.images if img.get("class") == "plot"]
    assert {img.get("id") for img in plots} == {"plot-metrics", "plot-quality-cost"}
    assert all(img["src"].startswith("data:image/png;base64,") for img in plots)
    sizes = parsed.body.get("data-images", "").split(",")
    assert len(sizes) == 2 and all(re.fullmatch(r"[1-9]\d*x[1-9]\d*", s) for s in sizes), sizes

    shot = _run(chromium, work / "profile", "--hide-scrollbars", "--window-size=1400,2400",
                f"--screenshot={screenshot}", page.as_uri())
    assert shot.returncode == 0 and screenshot.is_file(), shot.stderr[-2000:]
    from PIL import Image

    with Image.open(screenshot) as image:
        assert image.size == (1400, 2400)
        colors = image.convert("RGB").getcolors(maxcolors=1_000_000)
        assert colors is None or len(colors) > 100  # a real page with plots, not a blank canvas
    return parsed


def test_leaderboard_page_renders_in_headless_chromium(chromium, tmp_path, monkeypatch):
    monkeypatch.setenv("GUIDEBENCH_HOME", str(tmp_path / "home"))
    register_test_programs()
    data = make_dataset(tmp_path / "data", n=40, seed=7)
    board, _ = run_leaderboard(from_registry(["logged", "rule", "test.oracle"]), data, "test", n_resamples=200)
    out = tmp_path / "board"
    write_reports(board, out)
    screenshot = out / "leaderboard_screenshot.png"
    parsed = check_page(chromium, out / HTML_FILE, tmp_path, screenshot)
    names = [row[1].replace(" (champion)", "") for row in parsed.rows[1:]]
    assert names == [row.name for row in board.rows]
    assert parsed.rows[1][2] == f"{board.rows[0].metrics['objective'].value:.3f} " \
                                f"[{board.rows[0].metrics['objective'].ci_low:.3f}, " \
                                f"{board.rows[0].metrics['objective'].ci_high:.3f}]"


def test_sample_data_board_renders_and_its_screenshot_is_saved(chromium, tmp_path):
    if not SAMPLE_BOARD.is_file():
        pytest.skip(f"{SAMPLE_BOARD.relative_to(ROOT)} is not generated yet (see reports/leaderboard/README.md)")
    screenshot = tmp_path / "leaderboard.png"
    parsed = check_page(chromium, SAMPLE_BOARD, tmp_path, screenshot)
    assert len(parsed.rows) >= 3  # header plus at least the logged and rule baselines
    if os.environ.get("GUIDEBENCH_SAVE_SCREENSHOT") == "1":  # reports/leaderboard/regenerate.sh; a test run writes no repo file
        shutil.copyfile(screenshot, SAMPLE_SCREENSHOT)


# ----- what every rendering says per row (no browser needed) --------------------------------------

def _stats_board() -> Leaderboard:
    """A board of three rows compared by the real paired statistics: the champion, one clearly better
    on 30 records, one on 3 records (which no test can tell apart)."""
    rng = np.random.default_rng(0)
    champion = rng.choice([0.0, 0.5, 1.0], size=30)
    better = np.minimum(champion + 0.5, 1.0)
    scores = {"champ": champion, "better": better, "tiny": np.concatenate([np.ones(3), np.full(27, np.nan)])}
    rows = []
    for rank, (name, values) in enumerate(scores.items(), start=1):
        paired = paired_mean_difference(values, champion, n_resamples=200)
        rows.append(LeaderboardRow(
            rank=rank, name=name, package=name, version="1", entry="rule", source="registry",
            champion=name == "champ", n=30, metrics={"objective": bootstrap_mean(values, n_resamples=200)},
            cost=Cost(), comparison=_comparison("champ", "objective", paired)))
    return Leaderboard(kind="full_auto", dataset_id="d" * 64, split="test", split_hash="h" * 64, n_records=30,
                       champion="champ", champion_rule="named", created_at="now", guidebench_version="0",
                       rows=rows)


def _plots(tmp_path: Path) -> dict[str, Path]:
    from PIL import Image

    files = {}
    for name in (METRICS_PNG, QUALITY_COST_PNG):
        Image.new("RGB", (2, 2)).save(tmp_path / name)
        files[name] = tmp_path / name
    return files


def test_the_test_n_and_verdict_of_every_row_are_printed_in_markdown_html_and_terminal(tmp_path):
    board = _stats_board()
    better, tiny = board.row("better").comparison, board.row("tiny").comparison
    assert better.method == "permutation_monte_carlo" and better.p_value < 0.05 and better.diff > 0
    assert tiny.method == "permutation_exact" and tiny.n == 3 and tiny.p_value >= 0.25
    markdown = render_markdown(board)
    page = render_html(board, _plots(tmp_path))
    text = render_text(board)
    assert ranking_text(board) == text
    assert better.verdict().startswith("better, p ") and tiny.verdict().startswith("cannot tell apart (p = 0.")
    for rendering, escape in ((markdown, str), (page, html.escape), (text, str)):
        assert "verdict" in rendering and "test" in rendering
        assert escape(better.verdict()) in rendering and escape(tiny.verdict()) in rendering
    # the tests and interval methods, named as the comparisons actually used them; n per row
    assert better.test() == "Monte Carlo permutation test (9,999 assignments)"
    assert tiny.test() == "exact permutation test (8 assignments)"
    assert better.interval().endswith("bootstrap (200 resamples)")
    for rendering, cells in ((markdown, lambda *c: "| " + " | ".join(c) + " |"),
                             (page, lambda *c: "".join(f'<td class="num">{html.escape(x)}</td>' for x in c))):
        assert cells(better.test(), "30", better.verdict()) in rendering
        assert cells(tiny.test(), "3", tiny.verdict()) in rendering
        assert better.interval() in rendering
        assert "paired bootstrap" not in rendering
    header, *rows = text.splitlines()[2:]
    assert header.split()[:8] == ["#", "variant", "objective", "[95%", "CI]", "Δ", "vs", "champion"]
    assert " n " in header and "test" in header and "verdict" in header
    by_name = {line.split()[1]: line for line in rows}
    assert " 30  permutation_monte_carlo " in by_name["better"] and " 3  permutation_exact " in by_name["tiny"]
    assert "champion" in by_name["champ"].split("permutation_")[1]
    assert "Monte Carlo permutation test (9,999 assignments)" in text and "exact permutation test" in text


def test_a_planner_board_prints_the_real_n_its_episodes_and_no_verdict_against_its_interval(tmp_path):
    """The measured case: "the same 141 records" where the comparison used 83, and "better, p = 0.048" beside an
    interval holding 0; and a row whose records fall in too few episodes for any interval."""
    from evals.stats import MetricValue
    from guidebench.leaderboard.models import Comparison

    def row(rank, name, comparison, objective, champion=False):
        return LeaderboardRow(rank=rank, name=name, package=name, version="1", entry="planner.rules",
                              source="registry", champion=champion, n=141, metrics={"objective": objective},
                              cost=Cost(), comparison=comparison)

    estimated = MetricValue(value=0.8, ci_low=0.77, ci_high=0.82, n=83, method="bca", n_resamples=1000, n_groups=14)
    touching = Comparison(against="planner.logged", metric="objective", diff=0.072, ci_low=-0.004, ci_high=0.155,
                          p_value=0.048, n=83, method="permutation_exact", n_permutations=2 ** 14, ci_method="bca",
                          n_resamples=1000, n_groups=14)
    identity = Comparison(against="planner.logged", metric="objective", diff=0.0, ci_low=0.0, ci_high=0.0,
                          p_value=1.0, n=83, method="permutation_exact", n_groups=14)
    few = Comparison(against="planner.logged", metric="objective", diff=0.1, ci_low=None, ci_high=None, p_value=None,
                     n=40, method="too_few_groups", n_groups=3)
    sparse = MetricValue(value=0.9, ci_low=None, ci_high=None, n=40, method="too_few_groups", n_groups=3)
    board = Leaderboard(kind="planner", dataset_id="d" * 64, split="test", split_hash="h" * 64, n_records=141,
                        champion="planner.logged", champion_rule="named", created_at="now", guidebench_version="0",
                        rows=[row(1, "planner.learned", touching, estimated), row(2, "sparse", few, sparse),
                              row(3, "planner.logged", identity, estimated, champion=True)])
    verdict = "cannot tell apart (p = 0.048, but the 95% interval [-0.004, 0.155] includes 0; n = 83)"
    assert board.row("planner.learned").verdict() == verdict
    markdown, page, text = render_markdown(board), render_html(board, _plots(tmp_path)), render_text(board)
    for rendering, escape in ((markdown, str), (page, html.escape), (text, str)):
        assert escape(verdict) in rendering and "better, p" not in rendering
        assert "too few episodes (3 &lt; 10)" in rendering if escape is html.escape else \
            "too few episodes (3 < 10)" in rendering
    for rendering in (markdown, page):
        assert "the same 141 records" not in rendering
        assert "n in each row: 40-83 of 141 records in 3-14 episodes (the unit)" in rendering
        assert "exact permutation test over 14 episodes (16,384 assignments)" in rendering
    assert "0.900 (no interval: too few episodes (3 &lt; 10))" in page
