"""`guidebench monitor LOGS --module EXPORT`: watch the deployed champion's live logs, alarm when a watched quantity
leaves its promotion baseline (docs/monitor.md). Exit codes: 0 quiet, 1 an alarm is in force, 2 an error."""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path

from guidebench.commands import add_tracking_uri, ranged

_EVERY = re.compile(r"^(\d+(?:\.\d+)?)\s*(s|m|h)?$")


def every_seconds(text: str) -> float:
    """`--every`: 30s, 5m, 1h (a bare number is seconds)."""
    match = _EVERY.match(text.strip().lower())
    if not match or float(match.group(1)) <= 0:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a duration such as 30s, 5m or 1h")
    return float(match.group(1)) * {"s": 1, "m": 60, "h": 3600, None: 1}[match.group(2)]


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add `monitor`."""
    parser = subparsers.add_parser(
        "monitor", help="watch the deployed module's live logs; alarm with a stated false-alarm rate",
        description="Read what the deployed runtime appended to its logs since the last run (a Full Auto "
                    "workspace: decisions, raw answers, runs and events, labels; or a planner's experiments/log.jsonl "
                    "with its .advisor archive and planner-decisions.jsonl), update each watched quantity's "
                    "confidence sequence and compare it with the champion's evidence at promotion. Exit code 0: "
                    "quiet; 1: an alarm is in force; 2: an error. The chance of any alarm with no change is at most "
                    "--alpha.")
    parser.add_argument("logs", type=Path, metavar="LOGS", help="the folder the deployed runtime appends to")
    parser.add_argument("--module", type=Path, metavar="EXPORT", required=True,
                        help="the champion's export folder (its manifest, ledger entry and training support)")
    parser.add_argument("--alpha", type=ranged(float, low=0, high=0.5, above=True), default=0.05,
                        help="the error budget: chance of any false alarm, ever, over all metrics (default 0.05)")
    parser.add_argument("--reference", type=ranged(int, low=20), default=None, metavar="N",
                        help="records that make a metric's baseline when the champion's evidence has none "
                             "(default 500 Full Auto, 400 planner)")
    parser.add_argument("--ledger", type=Path, default=None, metavar="FILE",
                        help="promotion ledger (default GUIDEBENCH_HOME/promotions.jsonl)")
    parser.add_argument("--webhook", default=None, metavar="URL", help="POST new alarms as JSON (retried in the "
                        "background; never delays the next run)")
    parser.add_argument("--html", type=Path, default=None, metavar="PATH",
                        help="write the page with time series and bands (a .html file or a folder)")
    parser.add_argument("--mlflow", action="store_true", help="log each metric's series to MLflow, tagged with the "
                        "champion's registered model version")
    add_tracking_uri(parser)
    parser.add_argument("--every", type=every_seconds, default=None, metavar="DURATION",
                        help="keep running: a pass every DURATION (30s, 5m, 1h); Ctrl-C stops it between passes")
    parser.add_argument("--reset", action="store_true", help="forget the stored state and start over (after "
                        "acting on an alarm: a rollback, a new champion)")
    parser.add_argument("--quiet", action="store_true", help="print alarms only")
    parser.set_defaults(func=run)


def one_pass(args: argparse.Namespace, champion, reset: bool) -> int:
    """A pass and its sinks; returns the exit code."""
    from guidebench.home import guidebench_home
    from guidebench.monitor import report, sinks
    from guidebench.monitor.run import run_pass

    result = run_pass(args.logs, champion, alpha=args.alpha, reference=args.reference, reset=reset)
    state = result.state
    if args.webhook and result.new_alarms:
        sinks.send_webhook(args.webhook, sinks.payload(state, result.new_alarms, champion.package),
                           guidebench_home() / "monitor" / sinks.OUTBOX)
    failed = sinks.failed_deliveries(guidebench_home() / "monitor" / sinks.OUTBOX)
    if args.mlflow:
        run_id = sinks.log_mlflow(state, champion, args.tracking_uri)
        from guidebench.monitor.state import save_state

        save_state(result.path, state)  # keep the MLflow run id and what was logged
        if not args.quiet:
            print(f"MLflow run {run_id}")
    if args.html:
        page = report.write_html(state, args.html, champion.package, " ".join(["guidebench", *sys.argv[1:]]))
        if not args.quiet:
            print(f"page: {page}")
    if args.quiet:
        for alarm in result.alarms:
            print(alarm.line())
    else:
        print(f"{result.records} new records; state {result.path}")
        print(report.render_text(state))
        if state.counts:
            print("counts: " + report.describe(state.counts))
    if failed:
        print(f"webhook: {len(failed)} payloads were never delivered (see {failed[0].parent / 'webhook.log'})",
              file=sys.stderr)
    return result.exit_code


def run(args: argparse.Namespace) -> int:
    """One pass, or a pass every --every until Ctrl-C; a failure is exit code 2 (1 means an alarm)."""
    from guidebench.errors import GuidebenchError

    try:
        return _run(args)
    except (GuidebenchError, KeyboardInterrupt):
        raise
    except Exception as exc:  # a bug must not read as an alarm: rc 2, the traceback kept
        import traceback

        from guidebench.home import guidebench_home

        log = guidebench_home() / "last-error.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text(traceback.format_exc())
        raise GuidebenchError(f"monitor failed: {type(exc).__name__}: {exc} (traceback in {log})") from None


def _run(args: argparse.Namespace) -> int:
    from guidebench.monitor.evidence import load_champion

    champion = load_champion(args.module, args.ledger)
    code = one_pass(args, champion, args.reset)
    if args.every is None:
        return code
    try:
        while True:
            time.sleep(args.every)
            code = one_pass(args, champion, False)
    except KeyboardInterrupt:
        print("monitor stopped (Ctrl-C); the state of the last finished pass is kept", file=sys.stderr)
        return 130
