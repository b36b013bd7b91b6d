"""`guidebench eval`: score one program on one frozen split by replay, with intervals, tracked in MLflow."""

from __future__ import annotations

import argparse
from pathlib import Path

from guidebench.evaluation.inputs import DEFAULT_SPLIT, SPLIT_CHOICES
from guidebench.evaluation.run import evaluate, summary_table
from guidebench.commands import add_api_base, add_cycles_model, add_tracking_uri, ranged
from guidebench.cluster import add_cluster_argument


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the `eval` subcommand."""
    parser = subparsers.add_parser(
        "eval", help="replay a program on a dataset split and score it",
        description="Replay a program (registry name or exported module folder) on a dataset split, apply the "
                    "guardrails as production does, and write OUT/metrics.json (metric -> value, ci_low, "
                    "ci_high, n) and OUT/results.parquet; the run is logged to MLflow.")
    parser.add_argument("--program", required=True, metavar="NAME|EXPORT_DIR",
                        help="a registered program (see `guidebench programs`) or an exported frozen module folder")
    parser.add_argument("--data", required=True, type=Path, metavar="DIR",
                        help="a dataset folder, or a raw decision/experiment log (imported on the fly, scored whole)")
    parser.add_argument("--split", choices=SPLIT_CHOICES, default=None,
                        help=f"split to score (default {DEFAULT_SPLIT}; a raw log is always scored whole)")
    parser.add_argument("--lm", default=None, metavar="SPEC",
                        help="LM for programs that use one: `local` (embedded Gemma 3 270M, default) or a LiteLLM model")
    add_api_base(parser)
    parser.add_argument("--threads", type=ranged(int, low=1), default=1, metavar="N",
                        help="records replayed in parallel (default 1)")
    parser.add_argument("--no-cache", action="store_true",
                        help="call the LM afresh for every record (DSPy cache off): cost metrics are then uncached")
    add_tracking_uri(parser)
    parser.add_argument("--no-track", action="store_true", help="do not log the run to MLflow")
    parser.add_argument("--seed", type=int, default=0, help="seed of the bootstrap intervals (default 0)")
    parser.add_argument("--resamples", type=int, default=1000, metavar="B",
                        help="bootstrap resamples per interval (default 1000)")
    parser.add_argument("--max-records", type=int, default=None, metavar="N",
                        help="score only the first N records of the split (the split is then named <split>[:N])")
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    parser.add_argument("--out", required=True, type=Path, metavar="OUT",
                        help="output folder (new or empty; see --force)")
    parser.add_argument("--force", action="store_true", help="replace OUT when it holds an earlier evaluation")
    add_cycles_model(parser)
    add_cluster_argument(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run the evaluation and print the summary table."""
    from guidebench.errors import GuidebenchError

    if args.resamples < 1:
        raise GuidebenchError(f"--resamples {args.resamples}: must be at least 1")
    if args.max_records is not None and args.max_records < 1:
        raise GuidebenchError(f"--max-records {args.max_records}: must be at least 1")
    output = evaluate(args.program, args.data, split=args.split, lm=args.lm, threads=args.threads,
                      out_dir=args.out, tracking_uri=args.tracking_uri, track=not args.no_track,
                      progress=not args.no_progress, seed=args.seed, n_resamples=args.resamples,
                      max_records=args.max_records, cache=not args.no_cache, force=args.force,
                      cycles_model=args.cycles_model)
    data = output.data
    print(f"{output.program.name} on {args.data} (split {data.split}, {len(data.records)} records, "
          f"dataset {data.dataset_id[:12]})")
    for note in data.notes:
        print(f"note: {note}")
    print(summary_table(output.result, output.omitted_metrics))
    model = output.result.summary.get("cycles_model")
    if model:
        print(f"cycles model: {model['estimator']}")
    if output.result.summary.get("off_policy"):
        from guidebench.evaluation.outcome_models import describe

        for line in describe(output.result.summary["off_policy"]):
            print(line)
    if output.learned_from is not None and output.learned_from.status != "clean":
        print(f"warning: {output.learned_from.line()}")
    print(f"wrote {output.files['metrics']} and {output.files['results']}")
    if output.run_id:
        print(f"MLflow run {output.run_id}")
    return 0
