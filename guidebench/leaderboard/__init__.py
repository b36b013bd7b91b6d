"""Leaderboards: score package variants on one frozen split, rank them with intervals and a paired
comparison with the champion, and render Markdown, HTML, JSON and plots.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from runtime._lazy import lazy_exports

if TYPE_CHECKING:
    from guidebench.leaderboard.board import build_leaderboard, run_leaderboard, score_variants, rank, choose_champion
    from guidebench.leaderboard.models import Leaderboard, LeaderboardRow, Comparison, Cost
    from guidebench.leaderboard.split import FrozenSplit, ScoredVariant, SplitMismatchError, load_split
    from guidebench.leaderboard.render import render_markdown, render_html, write_reports
    from guidebench.leaderboard.pareto import pareto_front
    from guidebench.leaderboard.tracking import track_leaderboard
    from guidebench.leaderboard.packages import PackageManifest, Variant, resolve_variants
    from guidebench.leaderboard.postmortem import BoardPostMortem, board_postmortem

_WHERE: dict[str, str] = {
    "build_leaderboard": "board", "run_leaderboard": "board", "score_variants": "board", "rank": "board", "choose_champion": "board",
    "Leaderboard": "models", "LeaderboardRow": "models", "Comparison": "models", "Cost": "models",
    "FrozenSplit": "split", "ScoredVariant": "split", "SplitMismatchError": "split", "load_split": "split",
    "render_markdown": "render", "render_html": "render", "write_reports": "render",
    "pareto_front": "pareto",
    "track_leaderboard": "tracking",
    "PackageManifest": "packages", "Variant": "packages", "resolve_variants": "packages",
    "BoardPostMortem": "postmortem", "board_postmortem": "postmortem",
}
__all__ = sorted(_WHERE)

__getattr__, __dir__ = lazy_exports(__name__, _WHERE)
