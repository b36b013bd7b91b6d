"""`guidebench export`, `promote`, `rollback` and `run-loop`: frozen modules from export to production."""

from __future__ import annotations

import argparse
from pathlib import Path

from guidebench.errors import GuidebenchError
from guidebench.commands import add_api_base, add_tracking_uri, ranged


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the `export`, `promote`, `rollback` and `run-loop` subcommands."""
    export = subparsers.add_parser(
        "export", help="export a program as a frozen module folder",
        description="Write a frozen module (program.json, manifest.json, dsrs/, checksums.sha256) atomically, "
                    "from an MLflow run (its program and compiled state) or a registered program.")
    export.add_argument("run_id", nargs="?", metavar="RUN_ID", help="MLflow run whose compiled program to export")
    export.add_argument("--program", metavar="NAME", help="a registered program instead of a run")
    export.add_argument("--state", type=Path, metavar="FILE", help="compiled state JSON to load into --program")
    export.add_argument("--name", required=True, help="package name")
    export.add_argument("--version", required=True, metavar="X.Y.Z", help="package version")
    export.add_argument("--out", required=True, type=Path, metavar="DIR", help="folder to create")
    export.add_argument("--optimizer", default=None, metavar="NAME",
                        help="optimizer that compiled --state (default: the run's, else none / unknown)")
    export.add_argument("--tag", action="append", default=[], metavar="TAG", help="tag the package (repeatable)")
    export.add_argument("--force", action="store_true", help="replace DIR when it holds an earlier export")
    export.add_argument("--explore", default=None, metavar="POLICY",
                        help="a planner that explores: epsilon (planner.rules, planner.learned) or softmax "
                             "(planner.learned); default greedy (docs/planner-shadow.md)")
    export.add_argument("--epsilon", type=float, default=None, metavar="X", help="share spread over the open "
                        "families, in [0, 1] (default 0.2 for epsilon, 0 for softmax)")
    export.add_argument("--temperature", type=float, default=None, metavar="T",
                        help="softmax temperature in percent points of the best, in (0, 100] (default 0.1)")
    export.add_argument("--floor", type=float, default=None, metavar="P",
                        help="least probability of every open family, in [0, 1/3] (default 0.05)")
    export.add_argument("--explore-seed", type=int, default=None, metavar="S", help="seed of the draws (default 0)")
    add_tracking_uri(export)
    export.set_defaults(func=run_export)

    promote = subparsers.add_parser(
        "promote", help="gate a frozen module against the champion and promote it",
        description="Replay the module and the champion (before any champion: the logged decisions) on the same "
                    "held-out split, apply the gates, and on success stage it and register it as the MLflow "
                    "model alias `champion` (the replaced one becomes `previous`). Every attempt is recorded.")
    promote.add_argument("module", type=Path, metavar="DIR", help="exported frozen module folder")
    promote.add_argument("--gates", type=Path, metavar="FILE", help="gates file (.toml, .yaml or .json)")
    promote.add_argument("--data", required=True, type=Path, metavar="DIR", help="dataset folder of the evidence")
    promote.add_argument("--split", default="test", choices=("dev", "test"), help="held-out split (default test)")
    promote.add_argument("--baseline", default=None, metavar="NAME",
                         help="program measured when there is no champion yet (default: logged / planner.rules), "
                              "or instead of a champion that learned from the evidence (else refused)")
    promote.add_argument("--stage-only", action="store_true", help="stop at staged: do not register as champion")
    promote.add_argument("--lm", default=None, metavar="SPEC", help="LM for programs that use one (default local)")
    add_api_base(promote)
    promote.add_argument("--threads", type=ranged(int, low=1), default=1, metavar="N",
                         help="records replayed in parallel")
    promote.add_argument("--seed", type=int, default=0,
                         help="seed of the paired test's Monte Carlo assignments and bootstrap intervals (default 0)")
    promote.add_argument("--resamples", type=ranged(int, low=1), default=1000, metavar="B", help="bootstrap resamples")
    promote.add_argument("--ledger", type=Path, default=None, metavar="FILE",
                         help="promotion ledger (default GUIDEBENCH_HOME/promotions.jsonl)")
    add_tracking_uri(promote)
    promote.set_defaults(func=run_promote)

    rollback = subparsers.add_parser(
        "rollback", help="make the previous champion the champion again",
        description="Point the MLflow alias `champion` back at `previous` and record the rollback.")
    rollback.add_argument("name", metavar="NAME|DIR", help="package name (or its exported folder)")
    rollback.add_argument("--reason", default="", help="why (recorded with the rollback)")
    rollback.add_argument("--ledger", type=Path, default=None, metavar="FILE",
                          help="promotion ledger (default GUIDEBENCH_HOME/promotions.jsonl)")
    add_tracking_uri(rollback)
    rollback.set_defaults(func=run_rollback)

    loop = subparsers.add_parser(
        "run-loop", help="drive the Full Auto simulator with a frozen module and write its decision logs",
        description="Run simulated coding-agent runs whose turn-to-turn decisions come from a frozen module "
                    "(events -> summary -> decision -> guardrails -> dispatch) and write the original log "
                    "layout, which `guidebench data import` reads back. With --shadow, a candidate decides "
                    "every turn beside it (never enforced) into shadow-decisions.jsonl.")
    loop.add_argument("--module", type=Path, metavar="DIR",
                      help="exported frozen module folder that decides (default: the simulator's deployed policy)")
    loop.add_argument("--shadow", type=Path, metavar="DIR",
                      help="exported Full Auto module that decides beside it, never enforced (records candidate -> "
                           "shadow in the promotion ledger)")
    loop.add_argument("--shadow-deadline", type=ranged(float, low=0, above=True), default=5.0, metavar="S",
                      help="seconds the shadow may take per decision before it is recorded as a timeout (default 5)")
    loop.add_argument("--ledger", type=Path, default=None, metavar="FILE",
                      help="promotion ledger (default GUIDEBENCH_HOME/promotions.jsonl)")
    loop.add_argument("--runs", type=ranged(int, low=1), default=3, metavar="N", help="simulated runs (default 3)")
    loop.add_argument("--seed", type=int, default=0, metavar="S", help="simulator seed (default 0)")
    loop.add_argument("--out", required=True, type=Path, metavar="LOGDIR", help="workspace log folder to write")
    loop.add_argument("--lm", default=None, metavar="SPEC", help="LM for a module that uses one (default local)")
    add_api_base(loop)
    loop.add_argument("--max-turns", type=ranged(int, low=0), default=None, metavar="N",
                      help="guardrail max_turns of each run (0: no limit)")
    loop.add_argument("--min-confidence", type=ranged(float, low=0, high=1), default=None, metavar="X",
                      help="guardrail min_confidence, 0 to 1")
    loop.add_argument("--force", action="store_true", help="replace LOGDIR when it holds an earlier loop's logs")
    loop.set_defaults(func=run_loop_command)


def run_export(args: argparse.Namespace) -> int:
    """Export and print where the module went and its compiled_id."""
    from guidebench.release.export import export_frozen, exploration_settings, source_from_registry, source_from_run

    if bool(args.run_id) == bool(args.program):
        raise GuidebenchError("give either RUN_ID or --program NAME")
    if args.state is not None and not args.program:
        raise GuidebenchError("--state goes with --program (a run brings its own state)")
    if args.state is not None and not args.state.is_file():
        raise GuidebenchError(f"--state {args.state}: no such file")
    source = source_from_run(args.run_id, args.tracking_uri) if args.run_id else \
        source_from_registry(args.program, args.state)
    exploration = exploration_settings(args.explore, epsilon=args.epsilon, temperature=args.temperature,
                                       floor=args.floor, seed=args.explore_seed)
    if args.optimizer:
        source.optimizer = args.optimizer
    result = export_frozen(source, name=args.name, version=args.version, out=args.out, force=args.force,
                           tags=args.tag, inputs=[args.state] if args.state else [], exploration=exploration)
    manifest = result.manifest
    print(f"exported {manifest.package} (entry {manifest.entry}, {manifest.demo_count} demos) to {result.path}")
    print(f"signature {manifest.signature_name} {manifest.signature_hash[:16]}..., "
          f"dsrs compiled_id {result.compiled_id}")
    if manifest.exploration is not None:
        print(f"explores: {manifest.exploration.text()}")
    learned = manifest.provenance
    problem = learned.problem() if learned is not None else "the state does not record the records it learned from"
    print(f"learned from {learned.describe()}" if learned is not None and problem is None else
          f"provenance unknown: {problem}; `promote` refuses it (recompile, then export again)")
    if result.redactions or result.dropped_keys:
        print(f"redacted {result.redactions} value(s) and dropped {len(result.dropped_keys)} secret key(s)")
    return 0


def run_promote(args: argparse.Namespace) -> int:
    """Promote (or refuse) and print the verdict with its reasons; exit 1 when not promoted."""
    from guidebench.release.promotion import PromotionLedger, promote_module

    from guidebench.outputs import check_input

    check_input(args.module, "", ("export",), "an exported module folder")
    record = promote_module(args.module, data=args.data, split=args.split, gates_file=args.gates,
                            baseline=args.baseline, stage_only=args.stage_only, lm=args.lm, threads=args.threads,
                            seed=args.seed, n_resamples=args.resamples, tracking_uri=args.tracking_uri,
                            ledger=PromotionLedger(args.ledger) if args.ledger else None)
    label = record.module.package or record.module.name
    print(f"{label}: {record.outcome} ({record.from_state} -> {record.to_state})")
    if record.evidence is not None:
        e = record.evidence
        print(f"evidence: {e.n_records} records of split {e.split} (dataset {e.dataset_id[:12]}) "
              f"against {e.baseline}; LM {e.lm.describe() if e.lm else 'none'}")
        if e.champion_set_aside:
            print(f"  {e.champion_set_aside}")
    for check in record.checks or []:
        print(f"  [{'pass' if check.passed else 'FAIL'}] {check.reason}")
    for reason in record.reasons if not record.checks else []:
        print(f"  {reason}")
    return 0 if record.outcome in ("promoted", "staged") else 1


def run_rollback(args: argparse.Namespace) -> int:
    """Roll back and print the new champion."""
    from guidebench.release.promotion import PromotionLedger, rollback_module

    record = rollback_module(args.name, reason=args.reason, tracking_uri=args.tracking_uri,
                             ledger=PromotionLedger(args.ledger) if args.ledger else None)
    print(f"rolled back {record.module.package} (version {record.module.registry_version}); champion is now "
          f"{record.champion.package if record.champion else '?'} "
          f"(version {record.champion.registry_version if record.champion else '?'})")
    return 0


def run_loop_command(args: argparse.Namespace) -> int:
    """Run the simulated loop and print what was written."""
    from guidebench.release.closed_loop import run_loop

    from guidebench.release.promotion import PromotionLedger

    summary = run_loop(args.module, runs=args.runs, seed=args.seed, out=args.out, lm=args.lm,
                       max_turns=args.max_turns, min_confidence=args.min_confidence, force=args.force,
                       shadow=args.shadow, shadow_deadline_s=args.shadow_deadline,
                       ledger=PromotionLedger(args.ledger) if args.ledger else None)
    print(summary.describe())
    return 0
