"""A board's post-mortem: each row's own (slices, outliers; `evals.postmortem.post_mortem`) and, for each
challenger, the slices where it wins and loses against the champion, paired on the same records
(`evals.postmortem.compare_slices`); rendered as a section of leaderboard.md and leaderboard.html. A row that
learned from some of the board's records (its `runtime.provenance.OverlapCheck`) is in-sample: its own post-mortem
and its comparison with the champion say so first and draw no win or loss (the champion never learned from them:
`board.choose_champion`).
"""

from __future__ import annotations

import html
from typing import TYPE_CHECKING, Any, Mapping, Optional, Sequence

from pydantic import BaseModel, ConfigDict, Field

from evals.postmortem import ChallengerSlices, PostMortem, compare_slices, post_mortem

from guidebench.leaderboard.split import ScoredVariant
from guidebench.evaluation.postmortem import (comparison_lines, fmt_diff, fmt_eq, fmt_interval, fmt_p, in_sample_line,
                                              in_sample_text, pooled_text, table, verdict_lines)

if TYPE_CHECKING:
    from runtime.provenance import OverlapCheck


class BoardPostMortem(BaseModel):
    """Every row's post-mortem by row name, and each challenger's slices against the champion."""

    model_config = ConfigDict(extra="forbid")

    rows: dict[str, PostMortem] = Field(default_factory=dict)
    challengers: list[ChallengerSlices] = Field(default_factory=list)


def board_postmortem(ranked: Sequence[ScoredVariant], champion: ScoredVariant, *, n_resamples: int = 1000,
                     seed: int = 0, learned: Optional[Mapping[str, OverlapCheck]] = None) -> BoardPostMortem:
    """Post-mortems of a board's rows (in rank order) and of each challenger against the champion; `learned`
    (each row's check by label) marks the rows that learned from the board's records in-sample."""
    kind = champion.result.kind
    learned = learned or {}
    why = {item.variant.label: in_sample_line(learned.get(item.variant.label)) for item in ranked}
    champion_why = why[champion.variant.label]
    rows = {item.variant.label: post_mortem(kind, item.result.rows, program=item.variant.label,
                                            n_resamples=n_resamples, seed=seed, in_sample=why[item.variant.label])
            for item in ranked}
    challengers = [compare_slices(item.result.rows, champion.result.rows, kind, challenger=item.variant.label,
                                  champion=champion.variant.label, n_resamples=n_resamples, seed=seed,
                                  in_sample=_either(item.variant.label, why[item.variant.label],
                                                    champion.variant.label, champion_why))
                   for item in ranked if item is not champion]
    return BoardPostMortem(rows=rows, challengers=challengers)


def _either(challenger: str, challenger_why: str, champion: str, champion_why: str) -> str:
    """Why a challenger's comparison is in-sample: its own records learned from, else the champion's."""
    if challenger_why:
        return f"{challenger}: {challenger_why}"
    return f"{champion}: {champion_why}" if champion_why else ""


def _in_sample_rows(pm: BoardPostMortem) -> list[str]:
    """One line per row whose post-mortem is in-sample."""
    return [f"{name}: {in_sample_text(own.in_sample)}" for name, own in pm.rows.items() if own.in_sample]


def _outlier_rows(pm: BoardPostMortem) -> list[list[str]]:
    rows = []
    for name, own in pm.rows.items():
        for stat in own.outliers():
            rows.append([f"{name} (in-sample)" if own.in_sample else name, stat.family, stat.slice,
                         pooled_text(stat.value, stat.pooled), str(stat.n),
                         fmt_interval(stat.metrics.get(own.score_metric)), fmt_diff(stat.diff_vs_rest),
                         fmt_p(stat.q_value)])
    return rows


OUTLIER_HEADER = ["variant", "family", "slice", "value", "n", "objective [95% CI]", "Δ vs rest", "q"]


def _none_line(pm: BoardPostMortem) -> str:
    fdr = next(iter(pm.rows.values())).fdr if pm.rows else 0.05
    return f"No slice, pair or group of any row scores below its rest at FDR {fdr:g}."


def markdown_lines(pm: Optional[BoardPostMortem]) -> list[str]:
    """The board's post-mortem section in Markdown (nothing for a board written without one)."""
    if pm is None:
        return []
    lines = ["## Post-mortem", ""]
    lines += [f"> **{line}**" for line in _in_sample_rows(pm)] + ([""] if _in_sample_rows(pm) else [])
    for challenger in pm.challengers:
        lines += comparison_lines(challenger, "###") + [""]
    lines += ["### Slices below the rest, per row", ""]
    outliers = _outlier_rows(pm)
    lines += table(OUTLIER_HEADER, outliers) if outliers else [_none_line(pm)]
    if pm.rows:
        lines += ["", f"Test: {next(iter(pm.rows.values())).test}. Every row's slices, pairs, groups and cost "
                  "outliers are in leaderboard.json (`postmortem`)."]
    return lines + [""]


def _h(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _html_table(header: Sequence[str], rows: Sequence[Sequence[str]], table_id: str, numeric: Sequence[int] = (),
                classes: Optional[Sequence[str]] = None) -> str:
    head = "".join(f"<th>{_h(c)}</th>" for c in header)
    cell = lambda i, c: f'<td class="num">{_h(c)}</td>' if i in numeric else f"<td>{_h(c)}</td>"  # noqa: E731
    body = "".join(f'<tr class="{_h(classes[i]) if classes else ""}">' + "".join(cell(j, c) for j, c in enumerate(row))
                   + "</tr>" for i, row in enumerate(rows))
    return f'<table id="{_h(table_id)}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _challenger_html(cs: ChallengerSlices, index: int) -> str:
    o = cs.overall
    parts = [f"<h3>{_h(cs.challenger)} vs {_h(cs.champion)}, by slice</h3>",
             f"<p>{_h(cs.score_metric)} Δ (challenger − champion): {_h(fmt_diff(o.diff, o.ci_low, o.ci_high))}, "
             f"{_h(fmt_eq('p', o.p_value))}, n = {o.n}. Test: {_h(cs.test)}; minimum n {cs.min_n}.</p>"]
    parts.append("<ul>" + "".join(f"<li>{_h(label)}: {_h(text)}</li>" for label, text in verdict_lines(cs)) + "</ul>")
    rows, classes = [], []
    for d in cs.slices:
        c = d.comparison
        rows.append([d.slice, pooled_text(d.value, d.pooled), str(d.n),
                     fmt_diff(c.diff, c.ci_low, c.ci_high) if c else "—", fmt_p(c.p_value) if c else "—",
                     fmt_p(d.q_value), d.verdict if not d.untested else f"untested: {d.untested}"])
        classes.append({"wins": "fixed", "loses": "broken"}.get(d.verdict, ""))
    table = _html_table(["slice", "value", "n", f"Δ {cs.score_metric} [95% CI]", "p", "q", "verdict"], rows,
                        f"postmortem-slices-{index}", (2, 3, 4, 5), classes)
    parts.append(f"<details><summary>every slice value ({len(rows)})</summary>{table}</details>")
    return "".join(parts)


def html_section(pm: Optional[BoardPostMortem]) -> str:
    """The board's post-mortem section as HTML ("" for a board written without one)."""
    if pm is None:
        return ""
    parts = ['<h2 id="postmortem">Post-mortem</h2>']
    parts += [f'<p class="in-sample"><strong>{_h(line)}</strong></p>' for line in _in_sample_rows(pm)]
    parts += [_challenger_html(cs, index) for index, cs in enumerate(pm.challengers)]
    parts.append("<h3>Slices below the rest, per row</h3>")
    outliers = _outlier_rows(pm)
    parts.append(_html_table(OUTLIER_HEADER, outliers, "postmortem-outliers", (4, 5, 6, 7)) if outliers
                 else f"<p>{_h(_none_line(pm))}</p>")
    if pm.rows:
        parts.append(f"<p>Test: {_h(next(iter(pm.rows.values())).test)}. Every row's slices, pairs, groups and "
                     "cost outliers are in leaderboard.json (<code>postmortem</code>).</p>")
    return "".join(parts)
