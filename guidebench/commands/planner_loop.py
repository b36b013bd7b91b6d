"""`guidebench plan-loop`: a frozen planner drives simulated kernel episodes and writes the loop's logs with
the planner decision sidecar (docs/planner-shadow.md)."""

from __future__ import annotations

import argparse
from pathlib import Path

from guidebench.commands import ranged
from guidebench.errors import GuidebenchError


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add `plan-loop`."""
    loop = subparsers.add_parser(
        "plan-loop", help="drive the kernel simulator with a frozen planner; write log.jsonl and its sidecar",
        description="Run simulated kernel-optimization episodes whose directives come from a frozen planner module "
                    "(packet -> decision with every family's probability -> simulated attempt -> log line) and write "
                    "episode-NNNN/log.jsonl, its side file and planner-decisions.jsonl, which `guidebench data import "
                    "OUT --kind experiments` reads back with the logged propensities. With --shadow, a candidate "
                    "planner chooses beside it on every packet (never applied).")
    loop.add_argument("--module", required=True, type=Path, metavar="DIR", help="exported planner module that plans")
    loop.add_argument("--shadow", type=Path, metavar="DIR",
                      help="exported planner that chooses beside it, never applied (records candidate -> shadow)")
    loop.add_argument("--shadow-deadline", type=ranged(float, low=0, above=True), default=5.0, metavar="S",
                      help="seconds the shadow may take per packet before it is recorded as a timeout (default 5)")
    loop.add_argument("--episodes", type=ranged(int, low=1), default=4, metavar="N",
                      help="simulated episodes (default 4)")
    loop.add_argument("--seed", type=int, default=0, metavar="S", help="simulator seed (default 0)")
    loop.add_argument("--repository", default="simulator", metavar="ID",
                      help="the repository id the sidecar lines name (default simulator)")
    loop.add_argument("--out", required=True, type=Path, metavar="LOGDIR", help="folder of the episodes to write")
    loop.add_argument("--ledger", type=Path, default=None, metavar="FILE",
                      help="promotion ledger (default GUIDEBENCH_HOME/promotions.jsonl)")
    loop.add_argument("--force", action="store_true", help="replace LOGDIR when it holds an earlier loop's logs")
    loop.set_defaults(func=run_planner_loop_command)


def run_planner_loop_command(args: argparse.Namespace) -> int:
    """Run the planner loop and print what was written."""
    from guidebench.outputs import check_input, claim_output
    from guidebench.release.export import load_exported
    from guidebench.release.planner_loop import run_planner_loop

    module_dir = check_input(args.module, "--module", ("export",), "an exported module folder")
    deployed = load_exported(module_dir, label="--module")
    if deployed.manifest.kind != "planner":
        raise GuidebenchError(f"--module {args.module}: is a {deployed.manifest.kind} module; plan-loop needs "
                              "a planner (Full Auto modules: guidebench run-loop)")
    candidate = None
    if args.shadow is not None:
        from guidebench.release.planner_gate import start_planner_shadow
        from guidebench.release.promotion import PromotionLedger

        shadow_dir = check_input(args.shadow, "--shadow", ("export",), "an exported module folder")
        start_planner_shadow(shadow_dir, ledger=PromotionLedger(args.ledger) if args.ledger else None)
        candidate = load_exported(shadow_dir, label="--shadow")
    output = claim_output(args.out, "plan-loop", force=args.force, inputs=[module_dir])
    with output.writing() as staged:
        summary = run_planner_loop(deployed, staged, episodes=args.episodes, seed=args.seed, candidate=candidate,
                                   repository=args.repository, deadline_s=args.shadow_deadline)
    share = summary.explored / summary.iterations if summary.iterations else 0.0
    print(f"wrote {summary.episodes} episodes ({summary.iterations} iterations, {summary.explored} explored = "
          f"{share:.0%}; {summary.improvement:.0f} cycles taken off the best in all) to {args.out}")
    if summary.sidecar_errors:
        print(f"sidecar: {len(summary.sidecar_errors)} line(s) not written: {summary.sidecar_errors[0]}")
    print(f"import them with: guidebench data import {args.out} --kind experiments --out DATASET_DIR")
    return 0
