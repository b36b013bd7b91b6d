"""The post-mortem files of an eval output: `postmortem.json` (`evals.postmortem.PostMortem`) and a short
`postmortem.md` (numbers, tests and slice names only), and the Markdown of a challenger's slices against a
champion, which the board and `guidebench postmortem --against` print.

A post-mortem of records the program learned from (`in_sample`: the eval's `runtime.provenance.OverlapCheck` said
so) opens with that line on every surface (postmortem.md, the board's section in Markdown and HTML, an MLflow tag)
and draws no win or loss: its slices describe a fit, not evidence.

`write_postmortem` is called for every eval output (`guidebench.evaluation.run.write_outputs`: eval, compile,
search). A post-mortem that fails to compute never costs the eval its results: the failure is written into
`postmortem.json` as one line (`{"error": ...}`) and printed as a warning.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Optional, Sequence

if TYPE_CHECKING:
    from evals.postmortem import ChallengerSlices, PostMortem, SliceStat
    from evals.replay import ReplayResult
    from evals.stats import MetricValue
    from runtime.provenance import OverlapCheck

JSON_FILE = "postmortem.json"
MARKDOWN_FILE = "postmortem.md"
SLICE_ROWS_SHOWN = 60
GROUPS_SHOWN = 12


# ----- numbers ------------------------------------------------------------------------------------

def fmt_value(value: Optional[float], digits: int = 3) -> str:
    """A number for a cell; an em dash for none."""
    if value is None:
        return "—"
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.{digits}f}"


def fmt_interval(metric: Optional[MetricValue]) -> str:
    """`value [low, high]`."""
    if metric is None or metric.value is None:
        return "—"
    return f"{fmt_value(metric.value)} [{fmt_value(metric.ci_low)}, {fmt_value(metric.ci_high)}]"


def fmt_p(p_value: Optional[float]) -> str:
    """A p- or q-value floored at display precision."""
    if p_value is None:
        return "—"
    return "<0.001" if p_value < 0.001 else f"{p_value:.3f}"


def fmt_eq(name: str, p_value: Optional[float]) -> str:
    """`p = 0.123`, `p < 0.001` or `p = —`."""
    text = fmt_p(p_value)
    return f"{name} {text[0]} {text[1:]}" if text.startswith("<") else f"{name} = {text}"


def fmt_diff(diff: Optional[float], low: Optional[float] = None, high: Optional[float] = None) -> str:
    """`+diff` or `+diff [low, high]`."""
    if diff is None:
        return "—"
    return f"{diff:+.3f}" + (f" [{low:+.3f}, {high:+.3f}]" if low is not None and high is not None else "")


def table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> list[str]:
    """A Markdown table."""
    cell = lambda text: str(text).replace("|", "\\|").replace("\n", " ")  # noqa: E731
    return (["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
            + ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows])


# ----- in-sample ----------------------------------------------------------------------------------

IN_SAMPLE_HEAD = "In-sample, not evidence"


def in_sample_line(check: Optional[OverlapCheck]) -> str:
    """Why a replay's records are not evidence (the program learned from some of them), "" when they may be."""
    return check.line() if check is not None and check.overlaps else ""


def summary_in_sample(summary: dict[str, Any]) -> str:
    """`in_sample_line` of an eval's summary.json (its `learned_from` check; "" without one)."""
    from runtime.provenance import OverlapCheck

    raw = summary.get("learned_from")
    try:
        return in_sample_line(OverlapCheck.model_validate(raw)) if isinstance(raw, dict) else ""
    except ValueError:
        return ""


def in_sample_text(why: str, what: str = "its slices describe how it fits records it learned from") -> str:
    """The sentence every surface opens an in-sample post-mortem with."""
    return f"{IN_SAMPLE_HEAD}: {why}. {what[0].upper() + what[1:]}; no slice is a win or a loss."


# ----- one program --------------------------------------------------------------------------------

POOLED_SHOWN = 4


def pooled_text(value: str, pooled: Sequence[str]) -> str:
    """A slice value, with what a pooled value pools (the first few named, the rest counted)."""
    if not pooled:
        return value
    shown = ", ".join(pooled[:POOLED_SHOWN]) + (f", +{len(pooled) - POOLED_SHOWN} more" if len(pooled) > POOLED_SHOWN
                                                 else "")
    return f"{value} ({shown})"


def _value(stat: SliceStat) -> str:
    return pooled_text(stat.value, stat.pooled)


def _test_cells(stat: SliceStat) -> list[str]:
    if stat.untested:
        return ["—", "—", "—", f"untested: {stat.untested}"]
    return [fmt_diff(stat.diff_vs_rest), fmt_p(stat.p_value), fmt_p(stat.q_value), "below" if stat.outlier else ""]


def outlier_lines(pm: PostMortem) -> list[str]:
    """The outlier table (or the line saying there is none, with how many tests ran)."""
    tested = {family: sum(1 for s in stats if not s.untested)
              for family, stats in (("slice values", pm.slices), ("pairs", pm.pairs), ("groups", pm.groups))}
    counts = ", ".join(f"{n} {family}" for family, n in tested.items())
    found = pm.outliers()
    if not found:
        return [f"None at FDR {pm.fdr:g} ({counts} tested)."]
    rows = [[s.family, s.slice, _value(s), str(s.n), fmt_interval(s.metrics.get(pm.score_metric)),
             fmt_diff(s.diff_vs_rest), fmt_p(s.p_value), fmt_p(s.q_value)] for s in found]
    return [f"{len(found)} at FDR {pm.fdr:g} ({counts} tested):", ""] + table(
        ["family", "slice", "value", "n", f"{pm.score_metric} [95% CI]", "Δ vs rest", "p", "q"], rows)


def cost_lines(pm: PostMortem) -> list[str]:
    """One row per cost measure: its quartiles, the fence and the records above it."""
    rows = [[c.measure, str(c.n), fmt_value(c.median, 4), fmt_value(c.q3, 4), fmt_value(c.iqr, 4),
             fmt_value(c.fence, 4), str(c.n_outliers),
             ", ".join(f"{r['record_id']} ({fmt_value(r['value'], 4)})" for r in c.records[:5]) or "—"]
            for c in pm.cost]
    return table(["measure", "n", "median", "Q3", "IQR", "fence", "above", "costliest"], rows)


def render_markdown(pm: PostMortem) -> str:
    """`postmortem.md`: the header numbers, the outliers, every slice value, the groups, the cost fences."""
    from evals.postmortem import SLICE_METRICS

    metrics = list(SLICE_METRICS.get(pm.kind, (pm.score_metric,)))
    lines = [f"# Post-mortem: {pm.program or 'program'} ({pm.kind}), {pm.n_records} records", ""]
    if pm.in_sample:
        lines += [f"> **{in_sample_text(pm.in_sample)}**", ""]
    lines += [f"- {pm.score_metric}: {fmt_interval(pm.overall)}, n = {pm.overall.n}",
             f"- minimum n per slice value: {pm.min_n}; false-discovery rate: {pm.fdr:g}",
             f"- test: {pm.test}", f"- cost outliers: {pm.cost_rule}"]
    if pm.missing_slices:
        lines.append(f"- slices missing from these results: {', '.join(pm.missing_slices)}")
    lines += [f"- note: {note}" for note in pm.notes]
    lines += ["", "## Below the rest", ""] + outlier_lines(pm)
    lines += ["", "## Slices (value [95% CI])", ""]
    rows = [[s.slice, _value(s), str(s.n)] + [fmt_interval(s.metrics.get(m)) for m in metrics] + _test_cells(s)
            for s in pm.slices[:SLICE_ROWS_SHOWN]]
    lines += table(["slice", "value", "n", *metrics, "Δ vs rest", "p", "q", ""], rows)
    if len(pm.slices) > SLICE_ROWS_SHOWN:
        lines.append(f"\n… and {len(pm.slices) - SLICE_ROWS_SHOWN} more in {JSON_FILE}.")
    lines += ["", f"## Groups (threads or episodes; lowest {pm.score_metric} first)", ""]
    groups = sorted(pm.groups, key=lambda s: _sort_key(s, pm.score_metric))[:GROUPS_SHOWN]
    lines += table(["group", "n", f"{pm.score_metric} [95% CI]", "Δ vs rest", "p", "q", ""],
                   [[_value(s), str(s.n), fmt_interval(s.metrics.get(pm.score_metric))] + _test_cells(s)
                    for s in groups])
    if len(pm.groups) > GROUPS_SHOWN:
        lines.append(f"\n… {len(pm.groups)} groups in all, in {JSON_FILE}.")
    lines += ["", f"Pairs of slice values: {pm.n_pairs_tested} tested (in {JSON_FILE}); those below the rest are "
              "listed above.", "", "## Cost", ""] + cost_lines(pm)
    return "\n".join(lines).rstrip() + "\n"


def _sort_key(stat: SliceStat, metric: str) -> tuple:
    value = stat.metrics.get(metric)
    return (value is None or value.value is None, value.value if value is not None and value.value is not None
            else 0.0, stat.value)


# ----- against a champion -------------------------------------------------------------------------

LEANING_SHOWN = 6


def _named(diffs: Sequence[Any], limit: Optional[int] = None) -> str:
    shown = list(diffs)[:limit] if limit else list(diffs)
    text = "; ".join(f"{d.slice} = {d.value} ({fmt_diff(d.comparison.diff)}, {fmt_eq('q', d.q_value)})" for d in shown)
    return text + (f"; +{len(diffs) - len(shown)} more" if len(shown) < len(diffs) else "")


def verdict_lines(cs: ChallengerSlices) -> list[tuple[str, str]]:
    """(label, slices) lines: where the challenger loses and wins at the FDR, then where it is lower or higher
    without significance (lowest q first); for in-sample records, the one line that says why none is drawn."""
    if cs.in_sample:
        return [("no wins or losses", in_sample_text(cs.in_sample, "these differences are on records a program "
                                                                   "learned from"))]
    lines = [(f"{verdict} (q ≤ {cs.fdr:g})", _named(cs.verdicts(verdict)) or "none") for verdict in ("loses", "wins")]
    for label, sign in (("lower, not significant", -1), ("higher, not significant", 1)):
        lines.append((label, _named(cs.leaning(sign), LEANING_SHOWN) or "none"))
    return lines


def comparison_lines(cs: ChallengerSlices, heading: str = "##") -> list[str]:
    """A challenger's slices against the champion: overall line, losses, wins, every slice value."""
    o = cs.overall
    lines = [f"{heading} {cs.challenger} vs {cs.champion}, by slice", "",
             f"- {cs.score_metric} Δ (challenger − champion): {fmt_diff(o.diff, o.ci_low, o.ci_high)}, "
             f"{fmt_eq('p', o.p_value)}, n = {o.n}",
             f"- test: {cs.test}; minimum n {cs.min_n}"]
    if cs.missing_slices:
        lines.append(f"- slices missing from these results: {', '.join(cs.missing_slices)}")
    lines += [f"- {label}: {text}" for label, text in verdict_lines(cs)]
    rows = []
    for d in cs.slices:
        c = d.comparison
        rows.append([d.slice, pooled_text(d.value, d.pooled), str(d.n),
                     fmt_diff(c.diff, c.ci_low, c.ci_high) if c else "—", fmt_p(c.p_value) if c else "—",
                     fmt_p(d.q_value), d.verdict if not d.untested else f"untested: {d.untested}"])
    return lines + [""] + table(["slice", "value", "n", f"Δ {cs.score_metric} [95% CI]", "p", "q", "verdict"], rows)


# ----- files --------------------------------------------------------------------------------------

def write_postmortem(result: ReplayResult, out_dir: Path, learned_from: Optional[OverlapCheck] = None, *,
                     progress: bool = False) -> dict[str, Path]:
    """Write OUT/postmortem.json and OUT/postmortem.md for a replay (in-sample when `learned_from` overlaps;
    `progress`: its bar with the ETA); returns the files by name."""
    from evals.postmortem import post_mortem

    json_path, md_path = Path(out_dir) / JSON_FILE, Path(out_dir) / MARKDOWN_FILE
    summary = result.summary
    try:
        pm = post_mortem(result.kind, result.rows, program=result.program, seed=int(summary.get("seed", 0)),
                         n_resamples=int(summary.get("n_resamples", 1000)), in_sample=in_sample_line(learned_from),
                         progress=progress)
    except Exception as exc:  # a post-mortem bug must not cost the eval its results: say so, in the file too
        message = f"post-mortem not computed: {type(exc).__name__}: {exc}"
        print(f"warning: {message}", file=sys.stderr)
        json_path.write_text(json.dumps({"error": message}) + "\n", encoding="utf-8")
        return {"postmortem": json_path}
    json_path.write_text(pm.model_dump_json(indent=2) + "\n", encoding="utf-8")
    md_path.write_text(render_markdown(pm), encoding="utf-8")
    return {"postmortem": json_path, "postmortem_md": md_path}
