"""`guidebench runner install|plan|status|stop|uninstall`: a frozen planner plans for the real loop runner
(docs/runner.md)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from guidebench.errors import GuidebenchError


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add `runner` and its subcommands."""
    runner = subparsers.add_parser(
        "runner", help="plan the real loop runner's iterations with an exported planner",
        description="Put an exported planner in front of a kernel-optimization repository's loop runner "
                    "(tools/loop_runner.py): its codex-plan and codex-api-plan calls are answered by the frozen "
                    "module, its manual mode by `runner plan`; every plan is logged in experiments/"
                    "planner-decisions.jsonl for `guidebench data import`.")
    commands = runner.add_subparsers(dest="runner_command", metavar="SUBCOMMAND")
    runner.set_defaults(func=lambda args: (runner.print_help(), 0)[1])

    install = commands.add_parser(
        "install", help="install the planner's codex in REPO/.guidebench/bin",
        description="Write REPO/.guidebench/bin/codex (planning calls: the frozen module; every other call: the "
                    "real codex) and what the runner's login check needs (no credential), keep all of it out of "
                    "git, and print the line that puts it on PATH.")
    install.add_argument("repo", type=Path, metavar="REPO", help="the loop runner's repository (a git checkout)")
    install.add_argument("--module", required=True, type=Path, metavar="EXPORT", help="exported planner that plans")
    install.add_argument("--candidate", type=Path, metavar="EXPORT",
                         help="exported planner that chooses beside it on every packet, never applied "
                              "(records candidate -> shadow)")
    install.add_argument("--codex", type=Path, metavar="PATH",
                         help="the real codex for every other call (default: the next codex on PATH)")
    install.add_argument("--idle", type=float, default=None, metavar="S",
                         help="seconds without a call after which the planner service stops (default 1800)")
    install.set_defaults(func=run_install)

    plan = commands.add_parser(
        "plan", help="manual mode: write the directive for planner_packets/packet.json",
        description="Plan the packet `manual-pack` wrote, check the directive against directive_schema.json beside "
                    "it, write it to --out and its line to the repository's experiments/planner-decisions.jsonl.")
    plan.add_argument("packet", type=Path, metavar="PACKET", help="planner_packets/packet.json")
    plan.add_argument("--module", required=True, type=Path, metavar="EXPORT", help="exported planner that plans")
    plan.add_argument("--out", required=True, type=Path, metavar="DIRECTIVE",
                      help="where the directive goes (planner_packets/directive.json, then commit it)")
    plan.add_argument("--candidate", type=Path, metavar="EXPORT",
                      help="a shadowing planner (default: the one installed in the repository, if any)")
    plan.set_defaults(func=run_plan)

    status = commands.add_parser("status", help="what plans, how many iterations, the sidecar, the candidate's gate",
                                 description="Show the installed planner, the loop's iterations, the sidecar's "
                                             "line count, the candidate's gate state and the planner service.")
    status.add_argument("repo", type=Path, metavar="REPO")
    status.add_argument("--json", action="store_true", help="print JSON")
    status.set_defaults(func=run_status)

    stop = commands.add_parser("stop", help="stop the repository's planner service (the next call starts it again)",
                               description="Stop the planner service; it writes its queued sidecar lines first.")
    stop.add_argument("repo", type=Path, metavar="REPO")
    stop.set_defaults(func=run_stop)

    uninstall = commands.add_parser("uninstall", help="stop the service and remove what install wrote",
                                    description="Stop the planner service and remove REPO/.guidebench/bin, its "
                                                "configuration, the login placeholder and the git exclusions "
                                                "(the sidecar, which is data, stays, and stays out of git).")
    uninstall.add_argument("repo", type=Path, metavar="REPO")
    uninstall.set_defaults(func=run_uninstall)


def run_install(args: argparse.Namespace) -> int:
    """Install and print what was written and the PATH line."""
    from guidebench.runner.installation import install

    if args.idle is not None and args.idle <= 0:
        raise GuidebenchError(f"--idle {args.idle:g}: must be positive")
    report = install(args.repo, args.module, candidate=args.candidate, codex=args.codex, idle_s=args.idle)
    print(f"installed {report.config.module_name} as the planner of {report.config.repo}")
    for item in report.wrote:
        print(f"  wrote {item}")
    for note in report.notes:
        print(f"  note: {note}")
    print("put it on PATH (in the shell that runs the loop):")
    print(f"  {report.path_line}")
    return 0


def run_plan(args: argparse.Namespace) -> int:
    """Plan one manual iteration."""
    from guidebench.runner.manual import plan_packet

    answer, sidecar = plan_packet(args.packet, args.module, args.out, candidate=args.candidate)
    print(f"{answer.message}")
    print(f"wrote {args.out}; sidecar line -> {sidecar}")
    print("commit the directive, then: python3 tools/loop_runner.py manual-apply")
    return 0


def run_status(args: argparse.Namespace) -> int:
    """Print the status."""
    from guidebench.runner.status import runner_status

    status = runner_status(args.repo)
    print(json.dumps(status.as_dict(), indent=2) if args.json else "\n".join(status.lines()))
    return 0


def run_stop(args: argparse.Namespace) -> int:
    """Stop the service."""
    from guidebench.runner._base import Layout
    from guidebench.runner.installation import stop

    layout = Layout(args.repo.absolute())
    layout.read()
    print("stopped the planner service" if stop(layout) else "no planner service was running")
    return 0


def run_uninstall(args: argparse.Namespace) -> int:
    """Uninstall."""
    from guidebench.runner.installation import uninstall

    for item in uninstall(args.repo):
        print(f"removed {item}")
    print("take .guidebench/bin off PATH in the shells that had it")
    return 0
