"""`guidebench shadow start` and `guidebench shadow report`: a candidate decides beside the deployed program and is
promoted or rejected by a sequential gate that stays valid however often it is looked at."""

from __future__ import annotations

import argparse
from pathlib import Path

from guidebench.commands import add_tracking_uri


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add `shadow start` and `shadow report`."""
    shadow = subparsers.add_parser(
        "shadow", help="shadow a candidate module beside the deployed program; judge it sequentially",
        description="A candidate frozen module decides every turn beside the deployed program (runtime.shadow."
                    "ShadowRunner writes shadow-decisions.jsonl next to the decision log; never enforced). Import "
                    "the logs, then `shadow report` pairs both programs' decisions on the labeled turns and applies "
                    "a sequential gate whose error rate holds however often it is run.")
    commands = shadow.add_subparsers(dest="shadow_command", metavar="SUBCOMMAND")
    shadow.set_defaults(func=lambda args: (shadow.print_help(), 0)[1])

    start = commands.add_parser("start", help="record candidate -> shadow in the promotion ledger",
                                description="Record that a module starts shadowing (candidate -> shadow); `run-loop "
                                            "--shadow DIR` records it too.")
    start.add_argument("module", type=Path, metavar="DIR", help="exported Full Auto module folder")
    start.add_argument("--ledger", type=Path, default=None, metavar="FILE",
                       help="promotion ledger (default GUIDEBENCH_HOME/promotions.jsonl)")
    start.set_defaults(func=run_start)

    report = commands.add_parser(
        "report", help="judge a shadowing module: promote, reject or keep shadowing",
        description="Pair the module's shadow decisions with the deployed decisions on the labeled turns of an "
                    "imported dataset (every split), score both with the objective, and print the running "
                    "difference with its confidence sequence and the verdict: promote, reject, or keep shadowing "
                    "with about how many more labeled decisions the current difference needs. A verdict moves a "
                    "module the ledger has in shadow to promoted (the registry's champion) or rolled_back.")
    report.add_argument("--module", required=True, type=Path, metavar="DIR", help="the shadowing module's folder")
    report.add_argument("--data", required=True, type=Path, metavar="DIR",
                        help="dataset imported from logs with their shadow-decisions.jsonl")
    report.add_argument("--gates", type=Path, metavar="FILE",
                        help="gates file; its [sequential] table sets alpha, min_effect and max_decisions")
    report.add_argument("--out", type=Path, metavar="DIR",
                        help="also write shadow_report.json and the plot shadow_report.png into DIR")
    report.add_argument("--force", action="store_true", help="replace --out when it holds an earlier report")
    report.add_argument("--no-record", action="store_true", help="print the verdict; record nothing in the ledger")
    report.add_argument("--ledger", type=Path, default=None, metavar="FILE",
                        help="promotion ledger (default GUIDEBENCH_HOME/promotions.jsonl)")
    add_tracking_uri(report)
    report.set_defaults(func=run_report)
    _register_planner(commands)


def _register_planner(commands: argparse._SubParsersAction) -> None:
    """Add `shadow planner-start` and `shadow planner-report` (docs/planner-shadow.md)."""
    start = commands.add_parser("planner-start", help="record candidate -> shadow for a planner module",
                                description="Record that a planner module starts shadowing (candidate -> shadow); "
                                            "`plan-loop --shadow DIR` records it too.")
    start.add_argument("module", type=Path, metavar="DIR", help="exported planner module folder")
    start.add_argument("--ledger", type=Path, default=None, metavar="FILE",
                       help="promotion ledger (default GUIDEBENCH_HOME/promotions.jsonl)")
    start.set_defaults(func=run_planner_start)
    report = commands.add_parser(
        "planner-report", help="judge a shadowing planner: promote, reject or keep shadowing",
        description="Read the iterations of an experiments dataset imported with its planner-decisions.jsonl whose "
                    "lines hold the deployed planner's probabilities and this candidate's choice, in log order, and "
                    "judge the difference of their improvement per iteration with a doubly robust confidence "
                    "sequence (Waudby-Smith et al. 2022), valid at every look: promote, reject, or keep shadowing "
                    "with about how many more iterations. A verdict moves a module the ledger has in shadow to "
                    "promoted (the registry's champion) or rolled_back.")
    report.add_argument("--module", required=True, type=Path, metavar="DIR", help="the shadowing planner's folder")
    report.add_argument("--data", required=True, type=Path, metavar="DIR",
                        help="experiments dataset imported from logs with their planner-decisions.jsonl")
    report.add_argument("--gates", type=Path, metavar="FILE",
                        help="gates file; its [sequential] table sets alpha, min_effect and max_decisions (iterations)")
    report.add_argument("--out", type=Path, metavar="DIR", help="also write planner_report.json into DIR")
    report.add_argument("--force", action="store_true", help="replace --out when it holds an earlier report")
    report.add_argument("--no-record", action="store_true", help="print the verdict; record nothing in the ledger")
    report.add_argument("--ledger", type=Path, default=None, metavar="FILE",
                        help="promotion ledger (default GUIDEBENCH_HOME/promotions.jsonl)")
    add_tracking_uri(report)
    report.set_defaults(func=run_planner_report)


def run_planner_start(args: argparse.Namespace) -> int:
    """Record the start of a planner's shadowing."""
    from guidebench.release.planner_gate import start_planner_shadow
    from guidebench.release.promotion import PromotionLedger

    record = start_planner_shadow(args.module, ledger=PromotionLedger(args.ledger) if args.ledger else None)
    if record is None:
        print(f"{args.module}: already shadowing (the ledger has it in state shadow)")
    else:
        print(f"{record.module.package}: {record.from_state} -> shadow (attempt {record.attempt_id})")
    return 0


def run_planner_report(args: argparse.Namespace) -> int:
    """Judge the planner and print the report."""
    from guidebench.outputs import check_input, claim_output
    from guidebench.release.planner_gate import planner_report, write_planner_report
    from guidebench.release.promotion import PromotionLedger

    module = check_input(args.module, "--module", ("export",), "an exported module folder")
    data = check_input(args.data, "--data", ("data import", None), "a dataset folder")
    output = claim_output(args.out, "shadow planner-report", force=args.force, inputs=[module, data]) \
        if args.out else None
    report = planner_report(module, data=data, gates_file=args.gates, record=not args.no_record,
                            ledger=PromotionLedger(args.ledger) if args.ledger else None,
                            tracking_uri=args.tracking_uri)
    for line in report.lines():
        print(line)
    if output is not None:
        folder = write_planner_report(report, output)
        print(f"wrote {folder / 'planner_report.json'}")
    return 0


def run_start(args: argparse.Namespace) -> int:
    """Record the start of shadowing."""
    from guidebench.release.promotion import PromotionLedger
    from guidebench.release.shadow import start_shadow

    record = start_shadow(args.module, ledger=PromotionLedger(args.ledger) if args.ledger else None)
    if record is None:
        print(f"{args.module}: already shadowing (the ledger has it in state shadow)")
    else:
        print(f"{record.module.package}: {record.from_state} -> shadow (attempt {record.attempt_id})")
    return 0


def run_report(args: argparse.Namespace) -> int:
    """Judge the module and print the report."""
    from guidebench.outputs import check_input, claim_output
    from guidebench.release.promotion import PromotionLedger
    from guidebench.release.shadow import shadow_report, write_report

    module = check_input(args.module, "--module", ("export",), "an exported module folder")
    data = check_input(args.data, "--data", ("data import", None), "a dataset folder")
    # the output folder is checked before any work, as every command's
    output = claim_output(args.out, "shadow report", force=args.force, inputs=[module, data]) if args.out else None
    report = shadow_report(module, data=data, gates_file=args.gates, record=not args.no_record,
                           ledger=PromotionLedger(args.ledger) if args.ledger else None,
                           tracking_uri=args.tracking_uri)
    for line in report.lines():
        print(line)
    if output is not None:
        folder = write_report(report, output)
        print(f"wrote {folder / 'shadow_report.json'} and the plot {folder / 'shadow_report.png'}")
    return 0
