"""`guidebench data import` and `guidebench data simulate <kind>`."""

from __future__ import annotations

import argparse
from pathlib import Path

from guidebench.errors import GuidebenchError
from guidebench.cluster import add_cluster_argument


def _import(args: argparse.Namespace) -> int:
    from guidebench.data import import_logs
    from guidebench.data.archive_join import agreement_summary
    from guidebench.data.pipeline import QUARANTINE_FILE, REPORT_FILE

    options = {}
    if args.label_rules:
        options["label_rules"] = args.label_rules
    if args.ignore_side_labels:
        options["ignore_side_labels"] = True
    if args.shadow_module:
        options["shadow_module"] = args.shadow_module
    if args.planner_repository:
        options["planner_repository"] = args.planner_repository
    if args.max_line_bytes < 1:
        raise GuidebenchError(f"--max-line-bytes must be positive, got {args.max_line_bytes}")
    if args.num_proc < 1:
        raise GuidebenchError(f"--num-proc must be at least 1, got {args.num_proc}")
    report = import_logs(args.path, args.kind, args.out, seed=args.seed, progress=args.progress,
                         max_line_bytes=args.max_line_bytes, force=args.force, num_proc=args.num_proc, **options)
    out = Path(args.out)
    print(f"read {report.read} lines from {args.path}: imported {report.imported}, quarantined "
          f"{report.quarantined}, duplicates {report.duplicates} (blank lines {report.blank_lines}, "
          f"redactions {report.redactions})")
    extras = report.extra_counts()
    if extras:
        print(", ".join(f"{key} {value}" for key, value in extras.items()))
    agreement = agreement_summary(report)
    if agreement:
        print(agreement)
    if report.side_quarantined:
        print(f"side files: {report.side_quarantined} unusable line(s), see {out / 'quarantine-side.jsonl'}")
    splits = " / ".join(f"{name} {n}" for name, n in report.splits.items())
    print(f"dataset {report.dataset_id[:12]} ({splits}) -> {out}")
    print(f"report {out / REPORT_FILE}; quarantine {out / QUARANTINE_FILE} ({report.quarantined} line(s))")
    return 0


def _simulate(args: argparse.Namespace) -> int:
    from guidebench.data import SIMULATORS

    return SIMULATORS[args.sim_kind].run(args)


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add `data import` and `data simulate <kind>`."""
    data = subparsers.add_parser("data", help="import logs into datasets; simulate logs",
                                 description="Import decision or experiment logs into versioned datasets, or "
                                             "write seeded simulated logs in the real layout.")
    commands = data.add_subparsers(dest="data_command", metavar="SUBCOMMAND")
    data.set_defaults(func=lambda args: (data.print_help(), 0)[1])

    imp = commands.add_parser("import", help="import a log folder or file into a dataset folder",
                              description="Import logs into DIR: dataset splits, dataset.json, README.md (card), "
                                          "import_report.json and quarantine.jsonl. Exits 0 when anything was "
                                          "imported.")
    imp.add_argument("path", help="workspace log folder / decisions JSONL (fullauto) or log.jsonl / folder "
                                  "(experiments)")
    imp.add_argument("--kind", required=True, help="fullauto | experiments")
    imp.add_argument("--out", required=True, help="dataset folder to write (new or empty; see --force)")
    imp.add_argument("--force", action="store_true", help="replace --out when it holds an earlier import")
    imp.add_argument("--seed", type=int, default=0,
                     help="seed of the train/dev/test split of whole threads (fullauto) or episodes (default 0)")
    imp.add_argument("--label-rules", metavar="JSON", help="labeling-rule config (fullauto; see "
                                                           "guidebench.data.labels.LabelRuleConfig)")
    imp.add_argument("--ignore-side-labels", action="store_true",
                     help="do not use labels.jsonl; label by rules only (fullauto)")
    imp.add_argument("--shadow-module", metavar="DIR",
                     help="the module whose shadow-decisions.jsonl lines join their decisions; lines of another "
                          "module are quarantined (fullauto; default: the module most of the first sidecar's lines name)")
    imp.add_argument("--planner-repository", metavar="ID",
                     help="the repository planner-decisions.jsonl lines must name; others are quarantined "
                          "(experiments; default: the one each sidecar's first line names)")
    imp.add_argument("--max-line-bytes", type=int, default=64 * 1024 * 1024,
                     help="longer lines are quarantined (default 64 MiB)")
    imp.add_argument("--num-proc", type=int, default=1, metavar="N",
                     help="import the shards in N processes (experiments: episodes; fullauto: threads, once the "
                          "decisions are read; `datasets`' multiprocessing; the same dataset as one process; "
                          "default 1)")
    imp.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                     help="progress bars (default: when stderr is a terminal)")
    add_cluster_argument(imp)
    imp.set_defaults(func=_import)

    sim = commands.add_parser("simulate", help="write seeded simulated logs in the real layout")
    sim.set_defaults(func=lambda args: (sim.print_help(), 0)[1])
    sim.defer(_add_simulators)  # the simulators' modules are imported when `data simulate` is used


def _add_simulators(sim: argparse.ArgumentParser) -> None:
    """One subcommand per registered simulator (`data simulate <kind>`)."""
    from guidebench.data import SIMULATORS

    kinds = sim.add_subparsers(dest="sim_kind", metavar="KIND")
    for kind, spec in sorted(SIMULATORS.items()):
        parser = kinds.add_parser(kind, help=spec.help, description=spec.help)
        spec.add_arguments(parser)
        parser.set_defaults(func=_simulate, sim_kind=kind)
