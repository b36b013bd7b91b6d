"""Baselines on the committed sample data, written to reports/baselines.md by `guidebench baselines`.

Full Auto: `logged` (the deployed policy as logged), `rule`, `full_auto.always_continue` and the
uncompiled `full_auto.predict` on the embedded model; planner: `planner.rules` and the uncompiled
`planner.predict`. Each program is scored by `guidebench.evaluation.run.evaluate` on the same split,
tracked in MLflow (run ids in the report), and compared with the first program of its kind by the
paired permutation test (and McNemar's test).

The report follows `guidebench.outputs.claim_file`: a new path is written, a report `baselines` wrote
before is replaced only with `--force`, any other file never. The evaluation folders and the imported
sample under `GUIDEBENCH_HOME/baselines` are the command's own working folders, replaced on every run
(as `--force` replaces: only what they recorded writing), so the command runs again in the same home.
"""

from __future__ import annotations

import platform
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Optional, Sequence

from guidebench.errors import GuidebenchError
from guidebench.tracking.runs import git_commit, guidebench_home

if TYPE_CHECKING:  # imported where used: `guidebench --help` registers this command without DSPy
    from guidebench.evaluation.run import EvalOutput

REPO = Path(__file__).resolve().parent.parent
DEFAULT_FULLAUTO = REPO / "datasets" / "sample" / "fullauto"
DEFAULT_EXPERIMENTS = REPO / "datasets" / "sample" / "experiments"
DEFAULT_REPORT = REPO / "reports" / "baselines.md"
FULLAUTO_PROGRAMS: tuple[str, ...] = ("logged", "rule", "full_auto.always_continue", "full_auto.predict")
PLANNER_PROGRAMS: tuple[str, ...] = ("planner.rules", "planner.predict")
FULLAUTO_COLUMNS: tuple[str, ...] = ("objective", "action_accuracy", "macro_f1", "cost_weighted_error",
                                     "guardrail_override_rate", "parse_failure_rate", "brier", "ece",
                                     "next_input_proxy")
PLANNER_COLUMNS: tuple[str, ...] = ("objective", "schema_validity", "pivot_compliance", "cycles_improvement",
                                    "improvement_ratio", "effect_calibration", "parse_failure_rate")
# The uncompiled planner's prompt is ~1,500 tokens: about a minute per directive on 2 cores, more
# when the machine is shared; the default limit keeps the report regenerable in reasonable time.
DEFAULT_PLANNER_MAX_RECORDS = 12
COST_COLUMNS: tuple[str, ...] = ("lm_calls_per_decision", "tokens_per_decision", "latency_s_per_decision")


@dataclass
class Section:
    """One kind's baselines: the evaluations in report order."""

    kind: str
    data: Path
    outputs: list[EvalOutput]
    columns: Sequence[str]


def dataset_for(path: Path, kind: str, cache: Path, seed: int = 0) -> Path:
    """A dataset folder for the sample: the folder itself when it is one, else its seeded import (cached)."""
    if (path / "dataset.json").is_file():
        return path
    if not path.exists():
        from guidebench.outputs import interrupted

        raise GuidebenchError(interrupted(path, "sample data") or
                              f"sample data {path}: no such folder (regenerate it with `guidebench data simulate`)")
    from guidebench.data import import_logs

    target = cache / f"{kind}-seed{seed}"
    stamp = cache / f"{kind}-seed{seed}.source"  # beside the dataset: a file in it is not the import's
    latest = f"{path.resolve()}\n" + str(max((p.stat().st_mtime_ns for p in path.rglob("*") if p.is_file()),
                                              default=0))
    if not (target / "dataset.json").is_file() or not stamp.is_file() or stamp.read_text() != latest:
        import_logs(path, kind, target, seed, progress=False, force=True)
        stamp.write_text(latest)
    return target


def _cell(metric: Optional[dict]) -> str:
    if not metric or metric.get("value") is None:
        return "n/a"
    value, low, high = metric["value"], metric["ci_low"], metric["ci_high"]
    digits = 1 if abs(value) >= 10 else 3
    if low is None or high is None:  # e.g. too few episodes: no interval is claimed
        from evals.stats import describe_interval

        return f"{value:.{digits}f} ({describe_interval(metric.get('method'), None, metric.get('n_groups'))})"
    return f"{value:.{digits}f} [{low:.{digits}f}, {high:.{digits}f}]"


def _table(section: Section) -> list[str]:
    columns = [*section.columns, *COST_COLUMNS]
    lines = ["| program | " + " | ".join(columns) + " | MLflow run |",
             "|---|" + "---|" * len(columns) + "---|"]
    for output in section.outputs:
        metrics = output.result.metrics_dict()
        cells = [_cell(metrics.get(name)) for name in columns]
        lines.append(f"| `{output.program.name}` | " + " | ".join(cells) + f" | `{output.run_id or '-'}` |")
    return lines


def _paired(section: Section) -> list[str]:
    if len(section.outputs) < 2:
        return []
    from evals.replay import compare
    from guidebench.leaderboard.models import Comparison

    base = section.outputs[0]
    binary = "action_accuracy" if section.kind == "full_auto" else "schema_validity"
    rows, tests, intervals = [], set(), set()
    for output in section.outputs[1:]:
        result = compare(output.result, base.result)
        diff = result["metrics"].get("objective")
        if diff is None or diff.diff is None:
            cell, p_value, verdict, n, test = "n/a", "n/a", "not compared", 0, "n/a"
        else:
            comparison = Comparison(against=base.program.name, metric="objective",
                                    **diff.model_dump(exclude={"value_a", "value_b"}))
            cell = (f"{diff.diff:+.3f} [{diff.ci_low:+.3f}, {diff.ci_high:+.3f}]" if diff.ci_low is not None
                    else f"{diff.diff:+.3f} (no interval)")
            p_value = "n/a" if diff.p_value is None else f"{diff.p_value:.4f}"
            n, verdict, test = diff.n, comparison.verdict(), comparison.test()
            tests.add(test)
            intervals.add(comparison.interval())
        rows.append(f"| `{output.program.name}` | {cell} | {n} | {p_value} | {test} | {verdict} | "
                    f"{result['mcnemar']['p_exact']:.4f} |")
    # the methods named are the ones these comparisons used (exact or Monte Carlo, BCa or percentile)
    return [f"Paired against `{base.program.name}` on the same records (difference = program - "
            f"`{base.program.name}`; p from a paired permutation test of the records' assignments: "
            f"{', '.join(sorted(tests)) or 'none'}; 95% interval: {', '.join(sorted(intervals)) or 'none'}; "
            f"McNemar's exact p on {binary}):", "",
            "| program | Δ objective [95% CI] | n | p | test | verdict | McNemar p |",
            "|---|---|---:|---:|---|---|---:|", *rows]


def _header(section: Section) -> list[str]:
    from evals.stats import describe_interval

    data = section.outputs[0].data
    title = "Full Auto next-action decision" if section.kind == "full_auto" else "OptimizationDirective planner"
    # the interval methods the table's values actually used (BCa where defined, percentile otherwise)
    shown = (*section.columns, *COST_COLUMNS)
    methods = sorted({describe_interval(m.method, m.n_resamples) for output in section.outputs
                      for name, m in output.result.metrics.items() if name in shown and m.method})
    return [f"## {title}", "",
            f"Data `{section.data.relative_to(REPO) if section.data.is_relative_to(REPO) else section.data}`, "
            f"dataset `{data.dataset_id[:16]}`, split `{data.split}` ({len(data.records)} records, hash "
            f"`{data.split_hash[:16]}`). Values: estimate [95% interval: {', '.join(methods) or 'none'}]."]


def _notes(section: Section) -> list[str]:
    notes = []
    for output in section.outputs:
        s = output.result.summary
        if s["n_parse_failures"]:
            notes.append(f"`{output.program.name}`: {s['n_parse_failures']} of {s['n_records']} answers could not be "
                         "parsed and fell back to the safe default (scored 0).")
        if s["n_errors"]:
            notes.append(f"`{output.program.name}`: {s['n_errors']} records raised ({s['errors_by_class']}); "
                         "they score 0 with diagnostics in results.parquet.")
        if s.get("logged_enforcement_mismatches"):
            notes.append(f"`{output.program.name}`: today's guardrails would enforce differently on "
                         f"{s['logged_enforcement_mismatches']} logged decisions.")
        notes.append(f"`{output.program.name}`: {s['n_records']} records in {s['wall_s']:.1f} s, "
                     f"{s['usage']['lm_calls']} LM calls ({s['usage']['cache_hits']} from cache).")
        if s["usage"]["cache_hits"]:
            notes.append(f"`{output.program.name}`: cost columns count only the LM calls not served from DSPy's "
                         "cache; `guidebench baselines --no-cache` measures the full cost.")
    return [f"- {note}" for note in notes]


def render(sections: Sequence[Section], command: str, lm: str) -> str:
    """The Markdown report."""
    lines = ["# Baselines on the committed sample data", "",
             f"Regenerate with `{command}`. Generated {time.strftime('%Y-%m-%d %H:%M')} on "
             f"{platform.machine()} (git `{git_commit()[:12]}`), LM `{lm}` for the LM programs, the uncompiled "
             "programs with their seed demos. Every figure comes from the MLflow run in its row.", ""]
    for section in sections:
        lines += _header(section) + [""] + _table(section) + [""] + _paired(section) + [""] + _notes(section) + [""]
    lines += ["Metric definitions: `evals/metrics_fullauto.py` and `evals/metrics_planner.py` (objective, cost "
              "matrix, calibration); intervals: `evals/stats.py`."]
    return "\n".join(lines) + "\n"


def run_baselines(*, fullauto: Path = DEFAULT_FULLAUTO, experiments: Path = DEFAULT_EXPERIMENTS,
                  split: str = "test", lm: str = "local", threads: int = 1, tracking_uri: Optional[str] = None,
                  track: bool = True, out: Path = DEFAULT_REPORT, fullauto_programs: Sequence[str] = FULLAUTO_PROGRAMS,
                  planner_programs: Sequence[str] = PLANNER_PROGRAMS, fullauto_max_records: Optional[int] = None,
                  planner_max_records: Optional[int] = DEFAULT_PLANNER_MAX_RECORDS, progress: bool = True,
                  command: str = "guidebench baselines", cache: bool = True, force: bool = False) -> Path:
    """Evaluate every baseline on the sample data and write the report; returns its path.

    A record limit applies to every program of its kind, so they are still compared on the same
    records; the split is then named `<split>[:N]` in the report and in MLflow. The report is
    written only to a new path or, with `force`, over a report `baselines` wrote.
    """
    from guidebench.evaluation.run import evaluate
    from guidebench.outputs import claim_file, claim_output

    report = claim_file(Path(out), "baselines", force=force)
    work = guidebench_home() / "baselines"
    kinds = [(kind, source, names, columns, limit) for kind, source, names, columns, limit in (
        ("full_auto", fullauto, fullauto_programs, FULLAUTO_COLUMNS, fullauto_max_records),
        ("planner", experiments, planner_programs, PLANNER_COLUMNS, planner_max_records)) if names]
    for kind, _, names, _, _ in kinds:  # before any work: a working folder holding a file of yours stops it here
        for name in names:
            claim_output(work / "runs" / kind / name, "eval", force=True, label="working folder")
    announce_baselines(fullauto, experiments, split, lm, work, fullauto_programs, planner_programs,
                       fullauto_max_records, planner_max_records)
    sections = []
    for kind, source, names, columns, limit in kinds:
        data = dataset_for(Path(source), "fullauto" if kind == "full_auto" else "experiments", work)
        outputs = [evaluate(name, data, split=split, lm=lm, threads=threads, out_dir=work / "runs" / kind / name,
                            tracking_uri=tracking_uri, track=track, progress=progress, max_records=limit,
                            run_name=f"baseline {name} {split}", cache=cache, force=True)
                   for name in names]
        sections.append(Section(kind=kind, data=Path(source), outputs=outputs, columns=columns))
    return report.write(render(sections, command, lm))


def announce_baselines(fullauto: Path, experiments: Path, split: str, lm: str, work: Path,
                       fullauto_programs: Sequence[str], planner_programs: Sequence[str],
                       fullauto_max_records: Optional[int], planner_max_records: Optional[int]) -> str:
    """Print (and return) the one line saying which LM the LM programs use and what their records will cost."""
    import programs

    from guidebench.lm.cost import Scoring, announce
    from guidebench.evaluation.inputs import load_eval_data

    datasets = [(kind, dataset_for(Path(source), "fullauto" if kind == "full_auto" else "experiments", work),
                 names, limit)  # every dataset first: one that cannot be read stops the command before the estimate
                for kind, source, names, limit in (("full_auto", fullauto, fullauto_programs, fullauto_max_records),
                                                   ("planner", experiments, planner_programs, planner_max_records))
                if names]
    scorings = []
    for kind, data, names, limit in datasets:
        lm_names = [name for name in names if _uses_lm(name)]
        if lm_names:
            records = load_eval_data(data, split, max_records=limit).records
            scorings += [Scoring(name, programs.get(name), records, kind) for name in lm_names]
    return announce(lm, scorings)


def _uses_lm(name: str) -> bool:
    import programs

    try:
        return programs.spec(name).uses_lm
    except LookupError:  # not a registered program: its evaluation says so
        return False
